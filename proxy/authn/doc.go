// Package authn authenticates the sidecar's HTTP clients by their bearer
// tokens: static tokens from the config (kept as SHA-256, compared in
// constant time) and OAuth 2.1 access tokens from the organisation's
// identity providers, which makes provlog an MCP resource server (MCP
// authorization, 2025-06-18 onward). Every endpoint that needs a token
// (/mcp, the log API's protected reads, purging) authenticates through one
// [Authenticator], whose answer is an [Identity]: the actor id entries
// carry, and for OAuth tokens the claims that go in each entry's "auth"
// member ([log.Auth]).
//
// # Configuration
//
// [Config] is the "auth:" section of provlog's YAML config:
//
//	auth:
//	  resource: https://provlog.example/mcp   # this sidecar's canonical URL: tokens' aud (RFC 8707)
//	  issuers:
//	    - issuer: https://idp.example/          # the tokens' iss, exactly
//	      discovery_url: https://idp.example/.well-known/openid-configuration
//	      # or: jwks_url: https://idp.example/jwks.json
//	      actor_claim: sub                      # default sub; email, or any string claim
//	      allow_unverified_email: false         # email wants email_verified: true unless this is true
//	      actor_prefix: "idp.example:"          # default: the issuer's host and ":"
//	      algorithms: [RS256, ES256]            # default: RS*, PS*, ES*, EdDSA
//	      introspection:                        # optional: opaque tokens (RFC 7662)
//	        url: https://idp.example/oauth2/introspect   # default: discovery's introspection_endpoint
//	        client_id: provlog
//	        client_secret_file: introspect.secret        # read by cmd; never logged
//	      recheck: 30s                          # an introspected token is asked about again after: default 30s, 1s to 10m
//	  scopes:                                   # required scopes per tool group
//	    tools: [provlog.tools]                  # downstream tools, resources, prompts
//	    tasks: [provlog.tasks]                  # the task (OPP) tools
//	    log: [provlog.log]                      # the log API's protected reads, provlog__ tools
//	  clock_skew: 30s                           # default 30s, at most 5m
//	  jwks_min_refresh: 10s                     # least time between key set fetches: default 10s, 1s to 1h
//	  jwks_max_age: 5m                          # a key set older is fetched again: default 5m, jwks_min_refresh to 1h
//	  trusted_proxies: [10.0.0.0/8]             # reverse proxies whose X-Forwarded-For is believed (default none)
//
// The actor of an OAuth token is actor_prefix followed by the value of
// actor_claim, so two issuers' subjects cannot collide: no prefix may be a
// prefix of another, and no static actor id may start with one. A
// client's own token (its sub is its client_id or azp, and it has no act)
// maps to actor_prefix, [ClientNamespace] and the client id instead, so a
// client never acts as the person of its name. Static
// tokens (actors:, readers:) keep working beside OAuth and hold every
// scope, a reader's token only the log's.
//
// A running sidecar reloads the section with the rest of its config
// ([Authenticator.Reload]): the next request is authenticated under the
// new issuers, scopes and actor mapping, one already authenticated
// finishes under the old, and an issuer whose URLs stayed keeps the keys
// it fetched.
//
// # Validation
//
// A token of three dot-separated parts whose payload names an iss is a
// JWT access token (RFC 9068): its iss picks the configured issuer; the signature is checked with the issuer's JWKS
// (an allowed asymmetric algorithm only, so neither "none" nor HS256 with
// a public key passes), and aud must hold the resource, exp must be in the
// future and nbf and iat in the past (each within the clock skew), sub
// must be set, and a "cnf" (a sender-constrained token) is refused. The
// key set is fetched on first use and again when a token names an
// unknown kid (key rotation) or the set is jwks_max_age old (keys the
// issuer withdrew are dropped then), but never twice within
// jwks_min_refresh. Other
// tokens go to the introspection endpoints configured (RFC 7662), whose
// answer is held to the same checks. A token validated once is
// remembered by its SHA-256 until it expires, its issuer withdraws a
// key, or (a JWT) its issuer's key set is jwks_max_age old, when it is
// checked again against the set fetched anew; an introspected one for
// its issuer's recheck at most, default 30 s, so a revocation takes
// effect within that. So a client's next calls cost a hash and a map
// lookup. A
// token introspection refused is refused again for 10 s without a call,
// and one issuer's endpoint gets at most 20 calls a second (40 at once
// after a quiet spell, 16 awaiting answers), the requests of one source
// address half of that (behind a reverse proxy listed in trusted_proxies,
// the rightmost X-Forwarded-For hop that is no trusted proxy; the header
// of any other peer is ignored); beyond that a request is answered 503. A
// token's first check waits at most [IssuerTimeout] for its issuers.
//
// # Challenges
//
// A request without a token, or with one that fails, gets 401 and
// "WWW-Authenticate: Bearer resource_metadata=…" naming
// /.well-known/oauth-protected-resource (RFC 9728, [Authenticator.Metadata]),
// with error="invalid_token" when a token was sent; a token lacking the
// scopes of what it asks for gets 403 with error="insufficient_scope" and
// the scopes needed ([Authenticator.WriteError]). An issuer whose keys or
// introspection endpoint cannot be had makes 503 with fixed words; why
// goes to the Logger, URLs redacted ([log.RedactURL]). Tokens never reach a log
// line, an error message or an entry; entries keep their SHA-256.
package authn
