// A token caller: `rushmem serve --jwt-issuer` verifies every bearer token against a local
// OpenID Connect issuer (real RSA keys, its discovery document and JWKS served on 127.0.0.1), as the
// stack's JWT authorizer does; the user is the token's `sub`.
import assert from "node:assert/strict";
import { createSign, generateKeyPairSync, randomUUID, type KeyObject } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { Forbidden, MemoryClient } from "rushmem";
import { startServe, type Serve } from "./support.js";

const AUDIENCE = "rushmem-tests";

class LocalIssuer {
  readonly kid = randomUUID();
  private readonly keys = generateKeyPairSync("rsa", { modulusLength: 2048 });
  private readonly other = generateKeyPairSync("rsa", { modulusLength: 2048 }); // never published
  private server!: Server;
  url = "";

  async start(): Promise<void> {
    this.server = createServer((req, res) => {
      const body =
        req.url === "/.well-known/openid-configuration"
          ? { issuer: this.url, jwks_uri: `${this.url}/jwks.json`, id_token_signing_alg_values_supported: ["RS256"] }
          : req.url === "/jwks.json"
            ? { keys: [{ ...this.keys.publicKey.export({ format: "jwk" }), kid: this.kid, use: "sig", alg: "RS256" }] }
            : undefined;
      res.writeHead(body ? 200 : 404, { "content-type": "application/json" });
      res.end(body ? JSON.stringify(body) : "");
    });
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  token(sub: string, { expiresIn = 3600, key }: { expiresIn?: number; key?: KeyObject } = {}): string {
    const now = Math.floor(Date.now() / 1000);
    const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString("base64url");
    const unsigned = `${encode({ alg: "RS256", typ: "JWT", kid: this.kid })}.${encode({
      sub,
      iss: this.url,
      aud: AUDIENCE,
      iat: now,
      exp: now + expiresIn,
    })}`;
    const signature = createSign("RSA-SHA256").update(unsigned).sign(key ?? this.keys.privateKey).toString("base64url");
    return `${unsigned}.${signature}`;
  }

  otherKey(): KeyObject {
    return this.other.privateKey;
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const issuer = new LocalIssuer();
let serve: Serve;

before(async () => {
  await issuer.start();
  serve = await startServe(["--jwt-issuer", issuer.url, "--jwt-audience", AUDIENCE]);
});
after(async () => {
  await serve?.stop();
  await issuer.close();
});

test("a token acts for its own user: no user_id needed", async () => {
  const alice = new MemoryClient(serve.url, { token: issuer.token("alice"), timeoutMs: 30_000 });
  assert.equal(alice.auth, "jwt");
  const stored = await alice.add({ memories: "The user prefers dark mode" });
  assert.equal(stored.ids.length, 1);
  const recalled = await alice.recall({ query: "dark mode?" });
  assert.deepEqual(recalled.memories.map((m) => m.content), ["The user prefers dark mode"]);
  // A function gives a fresh token per request (what a session's refresh does).
  let calls = 0;
  const refreshing = new MemoryClient(serve.url, { token: async () => (calls++, issuer.token("alice")) });
  const page = await refreshing.list();
  assert.equal(page.memories.length, 1);
  assert.equal(calls, 1);
  // Another user's token sees none of it.
  const bob = new MemoryClient(serve.url, { token: issuer.token("bob") });
  assert.equal((await bob.list()).memories.length, 0);
});

test("a token cannot name another user, and a refused or missing token is Forbidden", async () => {
  const alice = new MemoryClient(serve.url, { token: issuer.token("alice") });
  await assert.rejects(alice.recall({ query: "x", user_id: "bob" }), (e: unknown) => {
    assert.ok(e instanceof Forbidden);
    assert.equal(e.status, 403);
    assert.equal(e.code, "forbidden");
    return true;
  });
  for (const token of [issuer.token("alice", { expiresIn: -600 }), issuer.token("alice", { key: issuer.otherKey() }), "not-a-jwt"]) {
    await assert.rejects(new MemoryClient(serve.url, { token }).list(), (e: unknown) => e instanceof Forbidden && e.status === 401);
  }
  await assert.rejects(new MemoryClient(serve.url).list({ user_id: "alice" }), (e: unknown) => e instanceof Forbidden && e.status === 401);
});

test("examples/hosted.ts: an app off AWS passes each signed-in user's token (docs/typescript.md)", async () => {
  const { memoryForUser, memoryBlock } = await import("../examples/hosted.js");
  let refreshed = 0;
  const carol = memoryForUser(serve.url, async () => (refreshed++, issuer.token("carol")));
  await carol.add({ memories: "The user deploys the app on Vercel" });
  const block = await memoryBlock(carol, "Where is the app deployed?", { userId: "someone-else" }); // ignored: the token's user
  assert.match(block, /Vercel/);
  assert.ok(refreshed >= 2, "a fresh token per request");
  const dave = memoryForUser(serve.url, () => issuer.token("dave"));
  assert.doesNotMatch(await memoryBlock(dave, "Where is the app deployed?", {}), /Vercel/);
});
