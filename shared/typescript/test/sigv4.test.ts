// IAM callers: the client signs with the AWS SDK's SigV4 signer (credentials from the default chain,
// here the environment), and an independent verifier written from the SigV4 specification
// (tests/sigv4.py's gateway, standing where API Gateway's AWS_IAM authorizer stands) checks every
// request before relaying it to a real `rushmem serve`.
import assert from "node:assert/strict";
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { Forbidden, MemoryClient } from "rushmem";
import { PYTHON, ROOT, pythonEnv, startServe, type Serve } from "./support.js";

// The verifier's example credentials (tests/sigv4.py).
const ACCESS_KEY = "AKIDEXAMPLE";
const SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

let serve: Serve;
let gateway: ChildProcessWithoutNullStreams;
let gatewayUrl: string;

before(async () => {
  serve = await startServe();
  gateway = spawn(
    PYTHON,
    ["-c", "import sys\nfrom tests.support.sigv4 import SigV4Gateway\ng = SigV4Gateway(sys.argv[1])\nprint(g.url, flush=True)\nsys.stdin.read()", serve.url],
    { cwd: ROOT, env: pythonEnv() },
  );
  gatewayUrl = await new Promise<string>((resolve, reject) => {
    createInterface({ input: gateway.stdout }).once("line", resolve);
    gateway.once("exit", (code) => reject(new Error(`the SigV4 gateway exited (${code})`)));
  });
  Object.assign(process.env, {
    AWS_ACCESS_KEY_ID: ACCESS_KEY,
    AWS_SECRET_ACCESS_KEY: SECRET_KEY,
    AWS_SESSION_TOKEN: "session-token",
    AWS_EC2_METADATA_DISABLED: "true",
  });
});
after(async () => {
  gateway?.stdin.end();
  await serve?.stop();
});

test("every kind of request, signed from the default credential chain, passes the verifier", async () => {
  const client = new MemoryClient(gatewayUrl, { auth: "iam", region: "eu-west-1", timeoutMs: 30_000 });
  assert.equal(client.auth, "iam");
  const { ids } = await client.add({
    memories: [{ content: "The user prefers TypeScript, strict mode & ESM", category: "preference", metadata: { team: "web/ui", "a b": "ç" } }],
    user_id: "iam user+1",
  });
  const recalled = await client.recall({ query: "TypeScript?", user_id: "iam user+1" });
  assert.equal(recalled.memories[0]?.id, ids[0]);
  // A query string with characters SigV4 encodes (spaces, '+', '/', JSON, non-ASCII): signed as sent.
  const page = await client.list({
    user_id: "iam user+1",
    filters: { metadata: { team: "web/ui", "a b": "ç" }, categories: ["preference", "fact"], created_after: "2020-01-01T00:00:00+00:00" },
  });
  assert.deepEqual(page.memories.map((m) => m.id), ids);
  const updated = await client.update({ memory_id: ids[0]!, user_id: "iam user+1", is_evergreen: true });
  assert.equal(updated.is_evergreen, true);
  await client.delete({ memory_id: ids[0]!, user_id: "iam user+1" });
  const receipt = await client.forgetUser({ user_id: "iam user+1" });
  assert.equal((await client.erasure({ erasure_id: receipt.id })).id, receipt.id);
});

test("a wrong secret is refused by the verifier: Forbidden", async () => {
  const client = new MemoryClient(gatewayUrl, {
    auth: "iam",
    region: "eu-west-1",
    credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: "not-the-secret" },
  });
  await assert.rejects(client.list({ user_id: "u" }), (e: unknown) => e instanceof Forbidden && e.status === 403);
});

test("an execute-api URL means IAM, with the region from the host", () => {
  const client = new MemoryClient("https://abc123.execute-api.eu-west-1.amazonaws.com");
  assert.equal(client.auth, "iam");
  assert.equal(new MemoryClient(serve.url).auth, "none");
});

test("examples/hosted.ts: an app off AWS signs with one scoped key from its environment (docs/typescript.md)", async () => {
  const { memoryForServer, memoryBlock } = await import("../examples/hosted.js");
  const env = { MEMORY_API_URL: gatewayUrl, MEMORY_API_REGION: "eu-west-1", MEMORY_ACCESS_KEY_ID: ACCESS_KEY, MEMORY_SECRET_ACCESS_KEY: SECRET_KEY };
  const memory = memoryForServer(env);
  assert.equal(memory.auth, "iam");
  await memory.add({ memories: "The user ships on Fridays", user_id: "app-user-7" });
  assert.match(await memoryBlock(memory, "When does the user ship?", { userId: "app-user-7" }), /Fridays/);
  assert.doesNotMatch(await memoryBlock(memory, "When does the user ship?", { userId: "app-user-8" }), /Fridays/);
  const stolen = memoryForServer({ ...env, MEMORY_SECRET_ACCESS_KEY: "a-leaked-id-without-its-secret" });
  await assert.rejects(memoryBlock(stolen, "x", { userId: "app-user-7" }), (e: unknown) => e instanceof Forbidden);
  assert.throws(() => memoryForServer({}), /MEMORY_API_URL/);
});
