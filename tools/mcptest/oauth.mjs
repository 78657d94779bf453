// oauth.mjs drives the official TypeScript MCP client's OAuth support
// (@modelcontextprotocol/sdk) against provlog for the OAuth tests. It reads
// one JSON plan from argv[2] and prints one JSON report on stdout:
//
// Plan:
//   {"url": "http://127.0.0.1:PORT/mcp",
//    "clientId": "...", "clientSecret": "...", "issuer": "http://hydra/",
//    "audience": "..."?,        // also send Hydra's "audience" parameter
//    "scope": "a b"?,           // the scopes to ask for
//    "tool": "everything__echo", "arguments": {...}}
//
// Report:
//   {"challenge": {"status", "wwwAuthenticate", "resourceMetadataUrl"},
//    "resourceMetadata": {...}, "authorizationServer": {"issuer", "token_endpoint"},
//    "connect": {"ok": true} | {"ok": false, "error": "..."},
//    "call": {"ok": true, "result": ...} | {"ok": false, "error": "..."},
//    "tokenClaims": {...}}  // the claims of the SDK's last token
//
// First it does what the SDK does on a 401, one step at a time, with the
// SDK's own functions: read the challenge, fetch the RFC 9728 metadata it
// names, fetch the authorization server's metadata. Then it connects with
// the SDK's ClientCredentialsProvider, which runs the whole flow itself.
import {
  extractWWWAuthenticateParams,
  discoverOAuthProtectedResourceMetadata,
  discoverAuthorizationServerMetadata,
} from "@modelcontextprotocol/sdk/client/auth.js";
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
const provider = plan.audience ? new AudienceProvider(options, plan.audience) : new ClientCredentialsProvider(options);
const client = new Client({ name: "oauth.mjs", version: "1" });
try {
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
// The claims of the last token the SDK got (never the token itself).
const at = provider.tokens()?.access_token;
if (at) report.tokenClaims = JSON.parse(Buffer.from(at.split(".")[1] ?? "", "base64url").toString() || "null");
console.log(JSON.stringify(report));
