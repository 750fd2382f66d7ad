// A real OpenID provider for the tests: oauth2-mock-server on 127.0.0.1,
// an ephemeral port, discovery + JWKS + token endpoint. Prints one JSON line
// {"issuer": ...} when listening, then answers JSON-line commands on stdin:
//   {"cmd": "token", "kid": "rs-1", "claims": {...}, "expiresIn": 600}
//   {"cmd": "generate", "alg": "ES256", "kid": "es-2"}
//   {"cmd": "generate", "alg": "PS256", "kid": "rsa-bare", "publishAlg": false}
//     the JWKS served omits that key's "alg", as Entra ID and oidc-provider
//     publish RSA keys; such a key then also signs with any algorithm of its
//     type: {"cmd": "token", "kid": "rsa-bare", "alg": "RS512", ...}
// It stops when stdin closes (the test ended) or on SIGTERM.
import { createInterface } from "node:readline";
import { OAuth2Server } from "oauth2-mock-server";

const server = new OAuth2Server();
// Kids whose "alg" the served JWKS omits. oauth2-mock-server always adds
// "alg" to the keys it generates; its JWKS endpoint publishes
// keys.toJSON(), so that is where "alg" is dropped.
const withoutAlg = new Set();
const publish = server.issuer.keys.toJSON.bind(server.issuer.keys);
server.issuer.keys.toJSON = (includePrivateFields = false) =>
  publish(includePrivateFields).map((jwk) => {
    if (includePrivateFields || !withoutAlg.has(jwk.kid)) return jwk;
    const { alg: _alg, ...bare } = jwk;
    return bare;
  });

// The provider signs with the stored key's "alg": to sign with another
// algorithm of an alg-less key, the same private key is stored again under
// its kid with that "alg" (what is published does not change).
async function useAlgorithm(kid, alg) {
  if (!withoutAlg.has(kid)) throw new Error(`key ${kid} is published with its alg`);
  const stored = server.issuer.keys.toJSON(true).find((jwk) => jwk.kid === kid);
  if (stored === undefined) throw new Error(`unknown key ${kid}`);
  if (stored.alg !== alg) await server.issuer.keys.add({ ...stored, alg });
}
await server.issuer.keys.generate("RS256", { kid: "rs-1" });
await server.issuer.keys.generate("ES256", { kid: "es-1" });
await server.start(0, "127.0.0.1");
const { port } = server.address();
server.issuer.url = `http://127.0.0.1:${port}`;
process.stdout.write(JSON.stringify({ issuer: server.issuer.url, port }) + "\n");

async function handle(command) {
  if (command.cmd === "token") {
    const claims = command.claims ?? {};
    if (command.alg !== undefined) await useAlgorithm(command.kid, command.alg);
    const token = await server.issuer.buildToken({
      kid: command.kid,
      expiresIn: command.expiresIn ?? 600,
      scopesOrTransform: (_header, payload) => Object.assign(payload, claims),
    });
    return { token };
  }
  if (command.cmd === "generate") {
    const jwk = await server.issuer.keys.generate(command.alg, { kid: command.kid });
    if (command.publishAlg === false) withoutAlg.add(jwk.kid);
    return { kid: jwk.kid };
  }
  return { error: `unknown command ${command.cmd}` };
}

// Commands run one after another, in the order they came, one answer each.
const lines = createInterface({ input: process.stdin });
let previous = Promise.resolve();
lines.on("line", (line) => {
  previous = previous.then(async () => {
    let answer;
    try {
      answer = await handle(JSON.parse(line));
    } catch (error) {
      answer = { error: String(error) };
    }
    process.stdout.write(JSON.stringify(answer) + "\n");
  });
});
lines.on("close", async () => {
  await server.stop();
  process.exit(0);
});
process.on("SIGTERM", async () => {
  await server.stop();
  process.exit(0);
});
