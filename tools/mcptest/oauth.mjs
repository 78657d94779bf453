// oauth.mjs drives the official TypeScript MCP client's OAuth support
// (@modelcontextprotocol/sdk) against provlog for the OAuth tests. It reads
// one JSON plan from argv[2] and prints one JSON report on stdout:
//
// Plan:
//   {"url": "http://127.0.0.1:PORT/mcp",
//    "clientId": "...", "clientSecret": "...", "issuer": "http://hydra/",
//    "audience": "..."?,        // also send Hydra's "audience" parameter
//    "scope": "a b"?,           // the scopes to ask for
//    "tool": "everything__echo", "arguments": {...},
//    "flow": "authorization_code"?, // else client credentials
//    "redirectUri": "..."?,     // the public client's redirect URI (authorization code)
//    "login": {"username", "password"}?, // what the user types into the sign-in form
//    "badVerifier": true?}      // replace the PKCE verifier before the code is exchanged
//
// Report:
//   {"challenge": {"status", "wwwAuthenticate", "resourceMetadataUrl"},
//    "resourceMetadata": {...}, "authorizationServer": {"issuer", "token_endpoint"},
//    "connect": {"ok": true} | {"ok": false, "error": "..."},
//    "call": {"ok": true, "result": ...} | {"ok": false, "error": "..."},
//    "authorization": {...}?,  // the authorization request's parameters (authorization code)
//    "tokenClaims": {...}}  // the claims of the SDK's last token
//
// First it does what the SDK does on a 401, one step at a time, with the
// SDK's own functions: read the challenge, fetch the RFC 9728 metadata it
// names, fetch the authorization server's metadata. Then it connects with
// the SDK's ClientCredentialsProvider, which runs the whole flow itself;
// or, for the authorization code flow, with a provider of a public client
// (PKCE, no secret): the SDK sends the user to the authorization URL, a
// user agent here follows Hydra's redirects through the login and consent
// app (filling in its sign-in form) to the redirect URI, and the SDK
// exchanges the code.
import {
  extractWWWAuthenticateParams,
  discoverOAuthProtectedResourceMetadata,
  discoverAuthorizationServerMetadata,
} from "@modelcontextprotocol/sdk/client/auth.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const plan = JSON.parse(process.argv[2]);
const report = {};

// The SDK sends RFC 8707's "resource"; Hydra reads only its own
// "audience" parameter, so a Hydra client adds it.
class AudienceProvider extends ClientCredentialsProvider {
  constructor(options, audience) {
    super(options);
    this.audience = audience;
  }
  prepareTokenRequest(scope) {
    const params = super.prepareTokenRequest(scope);
    params.set("audience", this.audience);
    return params;
  }
}

// CodeProvider is the OAuthClientProvider of a public client registered
// beforehand (no secret): it keeps tokens and the PKCE verifier in memory,
// and "redirects" by remembering the authorization URL.
class CodeProvider {
  constructor(plan) {
    this.plan = plan;
  }
  get redirectUrl() {
    return this.plan.redirectUri;
  }
  get clientMetadata() {
    return { client_name: "oauth.mjs", redirect_uris: [this.plan.redirectUri], grant_types: ["authorization_code"],
      response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation() {
    return { client_id: this.plan.clientId };
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  saveCodeVerifier(v) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  // state binds the redirect back to this request (RFC 6749 §10.12).
  state() {
    this.sentState = crypto.randomUUID();
    return this.sentState;
  }
  redirectToAuthorization(url) {
    this.authorizationUrl = new URL(url);
  }
}

// browse is the user agent: it follows redirects from url, keeping each
// origin's cookies (Hydra's login and consent CSRF cookies), until one
// leads to a URL under stop, which it returns. A page with a form is the
// login app's sign-in page: it fills in the plan's username and password
// and posts the form; shown the form again, the sign-in was refused.
async function browse(url, stop) {
  const jar = new Map();
  let method = "GET", body, signedIn = 0;
  for (let hops = 0; hops < 20; hops++) {
    if (url.startsWith(stop)) return new URL(url);
    const origin = new URL(url).origin;
    const cookies = jar.get(origin) ?? new Map();
    const headers = cookies.size ? { Cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") } : {};
    if (body) headers["Content-Type"] = "application/x-www-form-urlencoded";
    const res = await fetch(url, { method, body, redirect: "manual", headers });
    for (const c of res.headers.getSetCookie()) {
      const pair = c.split(";")[0];
      const eq = pair.indexOf("=");
      cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    jar.set(origin, cookies);
    const to = res.headers.get("location");
    if (res.status >= 300 && res.status <= 399 && to) {
      url = new URL(to, url).href;
      method = "GET", body = undefined;
      continue;
    }
    const page = await res.text();
    const form = signInForm(page, url);
    if (!form) throw new Error(`${url} answered ${res.status} with neither a redirect nor a form: ${page.slice(0, 500)}`);
    if (signedIn++ > 0) throw new Error(`sign-in refused (${res.status}): ${text(page.match(/<p role="alert">([\s\S]*?)<\/p>/)?.[1] ?? "")}`);
    if (!plan.login) throw new Error("the user agent was shown a sign-in form and has no credentials");
    url = form.action, method = "POST", body = form.body;
  }
  throw new Error("too many redirects");
}

// signInForm reads the one POST form of page: where it posts to, and its
// fields, hidden ones as they are and the plan's username and password.
function signInForm(page, base) {
  const f = page.match(/<form\b[^>]*\bmethod="post"[^>]*\baction="([^"]*)"[^>]*>([\s\S]*?)<\/form>/i);
  if (!f) return null;
  const body = new URLSearchParams();
  for (const [input] of f[2].matchAll(/<input\b[^>]*>/gi)) {
    const name = input.match(/\bname="([^"]*)"/)?.[1];
    if (!name) continue;
    const login = plan.login ?? {};
    body.set(name, name in login ? login[name] : text(input.match(/\bvalue="([^"]*)"/)?.[1] ?? ""));
  }
  return { action: new URL(text(f[1]), base).href, body: body.toString() };
}

// text undoes HTML's character references.
function text(s) {
  const named = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
  return s.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, (m, r) =>
    r[0] === "#" ? String.fromCodePoint(r[1] === "x" || r[1] === "X" ? parseInt(r.slice(2), 16) : parseInt(r.slice(1), 10)) : named[r] ?? m);
}

const res = await fetch(plan.url, {
  method: "POST",
  headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize",
    params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "oauth.mjs", version: "1" } } }),
});
const params = extractWWWAuthenticateParams(res);
report.challenge = {
  status: res.status,
  wwwAuthenticate: res.headers.get("www-authenticate"),
  resourceMetadataUrl: params.resourceMetadataUrl?.href ?? null,
};
try {
  report.resourceMetadata = await discoverOAuthProtectedResourceMetadata(plan.url, { resourceMetadataUrl: params.resourceMetadataUrl });
  const as = await discoverAuthorizationServerMetadata(report.resourceMetadata.authorization_servers[0]);
  report.authorizationServer = { issuer: as?.issuer, token_endpoint: as?.token_endpoint };
} catch (e) {
  report.discoveryError = String(e?.message ?? e);
}

// For client credentials the SDK asks for the scopes configured here
// only (not those of the metadata or of a 403's challenge).
const options = { clientId: plan.clientId, clientSecret: plan.clientSecret, expectedIssuer: plan.issuer, scope: plan.scope };
let provider;
if (plan.flow === "authorization_code") provider = new CodeProvider(plan);
else provider = plan.audience ? new AudienceProvider(options, plan.audience) : new ClientCredentialsProvider(options);
const client = new Client({ name: "oauth.mjs", version: "1" });
try {
  if (plan.flow === "authorization_code") await authorize(provider);
  await client.connect(new StreamableHTTPClientTransport(new URL(plan.url), { authProvider: provider }));
  report.connect = { ok: true };
  try {
    const result = await client.callTool({ name: plan.tool, arguments: plan.arguments ?? {} });
    report.call = { ok: !result.isError, result };
  } catch (e) {
    report.call = { ok: false, error: String(e?.message ?? e) };
  }
  await client.close();
} catch (e) {
  report.connect = { ok: false, error: String(e?.message ?? e) };
}
// authorize runs the authorization code flow: a first connect gets the
// 401, and the SDK sends the user to the authorization URL (with its PKCE
// challenge and provlog as the resource); the user agent signs in and
// consents; the SDK exchanges the code (with its verifier) for tokens.
// Hydra names the token's audience from its own "audience" parameter
// only, so the client adds it to the authorization request.
async function authorize(provider) {
  const transport = new StreamableHTTPClientTransport(new URL(plan.url), { authProvider: provider });
  try {
    await new Client({ name: "oauth.mjs", version: "1" }).connect(transport);
    throw new Error("connected without authorization");
  } catch (e) {
    if (!(e instanceof UnauthorizedError)) throw e;
  }
  const u = provider.authorizationUrl;
  if (!u) throw new Error("the SDK did not send the user to an authorization URL");
  const p = u.searchParams;
  report.authorization = { endpoint: u.origin + u.pathname, response_type: p.get("response_type"), client_id: p.get("client_id"),
    code_challenge_method: p.get("code_challenge_method"), code_challenge: p.get("code_challenge"), resource: p.get("resource"),
    scope: p.get("scope"), redirect_uri: p.get("redirect_uri") };
  if (plan.audience) p.set("audience", plan.audience);
  const back = await browse(u.href, plan.redirectUri);
  const code = back.searchParams.get("code");
  if (!code) throw new Error(`the redirect back carries no code: ${back.search}`);
  if (back.searchParams.get("state") !== provider.sentState) throw new Error("the redirect back carries another state");
  if (plan.badVerifier) provider.saveCodeVerifier("x".repeat(64));
  await transport.finishAuth(code);
}

// The claims of the last token the SDK got (never the token itself).
const at = provider.tokens()?.access_token;
if (at) report.tokenClaims = JSON.parse(Buffer.from(at.split(".")[1] ?? "", "base64url").toString() || "null");
console.log(JSON.stringify(report));
