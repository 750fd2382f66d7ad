// A real OpenID provider with a login page for the browser tests: the
// certified npm package oidc-provider on 127.0.0.1, an ephemeral port.
// It implements the authorize and token endpoints with PKCE (S256 only;
// required of the public client), issues JWT access tokens for one API
// (a resource indicator) and answers CORS on the token endpoint for the
// origin of the client's redirect URI, as a single-page-app registration does.
// Its development login page takes any login and password; the account id is
// the login typed.
//
// Started with one JSON argument:
//   {"clientId": "swagger-ui", "redirectUri": "http://127.0.0.1:PORT/docs/oauth2-redirect",
//    "resource": "https://orders.example", "audience": "https://orders.example",
//    "scopes": ["orders:read", "orders:write"],
//    "tenant": null}
// With "tenant" set, the provider takes Entra ID's shape: issuer
// <origin>/<tenant>/v2.0, endpoints <origin>/<tenant>/oauth2/v2.0/authorize
// and /token, keys at <origin>/<tenant>/discovery/v2.0/keys, and access
// tokens that carry the short scope names in "scp" (Orders.Read for
// api://<app>/Orders.Read), "tid", "azp" and "ver": "2.0" instead of
// "scope" and "client_id".
// Prints one JSON line {"origin": ..., "issuer": ...} when listening; stops
// when stdin closes (the test ended) or on SIGTERM.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import Provider from "oidc-provider";

const settings = JSON.parse(process.argv[2]);
const tenant = settings.tenant ?? null;

const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
const signing = { ...privateKey.export({ format: "jwk" }), kid: "login-1", alg: "RS256", use: "sig" };

let handle;
const server = createServer((request, response) => handle(request, response));
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const origin = `http://127.0.0.1:${server.address().port}`;
const issuer = tenant ? `${origin}/${tenant}/v2.0` : origin;

const routes = tenant
  ? {
      authorization: `/${tenant}/oauth2/v2.0/authorize`,
      token: `/${tenant}/oauth2/v2.0/token`,
      jwks: `/${tenant}/discovery/v2.0/keys`,
    }
  : {};

// Entra ID names the scopes of an API by its Application ID URI, and writes
// the part after the last "/" into the token's "scp".
function shortName(scope) {
  return scope.slice(scope.lastIndexOf("/") + 1);
}

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: settings.clientId,
      token_endpoint_auth_method: "none",
      redirect_uris: [settings.redirectUri],
      grant_types: ["authorization_code"],
      response_types: ["code"],
    },
  ],
  jwks: { keys: [signing] },
  cookies: { keys: [randomBytes(32).toString("base64url")] },
  routes,
  pkce: { required: () => true },
  clientBasedCORS: (_ctx, requestOrigin, client) =>
    client.redirectUris.some((uri) => new URL(uri).origin === requestOrigin),
  findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  features: {
    devInteractions: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // Entra ID finds the API from the scope names: the tenant shape makes
      // it the default. Otherwise the client names it ("resource", RFC 8707),
      // or the token is an opaque one for the provider's own userinfo.
      defaultResource: (_ctx, _client, oneOf) => (tenant ? settings.resource : oneOf),
      getResourceServerInfo: (_ctx, resource) => {
        if (resource !== settings.resource) throw new Error(`unknown resource ${resource}`);
        return {
          scope: settings.scopes.join(" "),
          audience: settings.audience,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "RS256" } },
        };
      },
    },
  },
  formats: {
    customizers: {
      jwt: (_ctx, token, jwt) => {
        if (!tenant) return jwt;
        const { payload } = jwt;
        payload.scp = token.scope.split(" ").map(shortName).join(" ");
        payload.tid = tenant;
        payload.azp = payload.client_id;
        payload.ver = "2.0";
        delete payload.scope;
        delete payload.client_id;
        return jwt;
      },
    },
  },
});

const callback = provider.callback();
const discovery = tenant ? `/${tenant}/v2.0/.well-known/` : null;
handle = (request, response) => {
  // The issuer has a path: its metadata is at <issuer>/.well-known/...
  if (discovery && request.url.startsWith(discovery)) {
    request.url = request.url.slice(discovery.length - "/.well-known/".length);
  }
  callback(request, response);
};

process.stdout.write(JSON.stringify({ origin, issuer }) + "\n");

function stop() {
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.stdin.on("data", () => {});
process.stdin.on("end", stop);
process.on("SIGTERM", stop);
