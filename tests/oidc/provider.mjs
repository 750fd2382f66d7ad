// A real OpenID provider for the tests: oauth2-mock-server on 127.0.0.1,
// an ephemeral port, discovery + JWKS + token endpoint. Prints one JSON line
// {"issuer": ...} when listening, then answers JSON-line commands on stdin:
//   {"cmd": "token", "kid": "rs-1", "claims": {...}, "expiresIn": 600}
//   {"cmd": "generate", "alg": "ES256", "kid": "es-2"}
// It stops when stdin closes (the test ended) or on SIGTERM.
import { createInterface } from "node:readline";
import { OAuth2Server } from "oauth2-mock-server";

const server = new OAuth2Server();
await server.issuer.keys.generate("RS256", { kid: "rs-1" });
await server.issuer.keys.generate("ES256", { kid: "es-1" });
await server.start(0, "127.0.0.1");
const { port } = server.address();
server.issuer.url = `http://127.0.0.1:${port}`;
process.stdout.write(JSON.stringify({ issuer: server.issuer.url, port }) + "\n");

async function handle(command) {
  if (command.cmd === "token") {
    const claims = command.claims ?? {};
    const token = await server.issuer.buildToken({
      kid: command.kid,
      expiresIn: command.expiresIn ?? 600,
      scopesOrTransform: (_header, payload) => Object.assign(payload, claims),
    });
    return { token };
  }
  if (command.cmd === "generate") {
    const jwk = await server.issuer.keys.generate(command.alg, { kid: command.kid });
    return { kid: jwk.kid };
  }
  return { error: `unknown command ${command.cmd}` };
}

const lines = createInterface({ input: process.stdin });
lines.on("line", async (line) => {
  let answer;
  try {
    answer = await handle(JSON.parse(line));
  } catch (error) {
    answer = { error: String(error) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
lines.on("close", async () => {
  await server.stop();
  process.exit(0);
});
process.on("SIGTERM", async () => {
  await server.stop();
  process.exit(0);
});
