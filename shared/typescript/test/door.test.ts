// scripts/door.mjs, the TypeScript door of the cross-door conformance test: JSON Lines of calls in,
// one JSON line per call out (the answer, or the error's kind, code, status, field and message).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { PACKAGE, startServe, type Serve } from "./support.js";

let serve: Serve;

before(async () => {
  serve = await startServe();
});
after(async () => {
  await serve?.stop();
});

async function door(lines: unknown[], args: string[] = []): Promise<unknown[]> {
  const child = spawn(process.execPath, [join(PACKAGE, "scripts", "door.mjs"), "--url", serve.url, ...args]);
  let out = "";
  let err = "";
  child.stdout.on("data", (c: Buffer) => (out += c.toString()));
  child.stderr.on("data", (c: Buffer) => (err += c.toString()));
  child.stdin.end(lines.map((line) => (typeof line === "string" ? line : JSON.stringify(line))).join("\n") + "\n");
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  assert.equal(code, 0, err);
  return out.trim().split("\n").map((line) => JSON.parse(line) as unknown);
}

test("each call's answer or error, one line each, in order", async () => {
  const missing = "00000000-0000-4000-8000-000000000000";
  const answers = (await door([
    { op: "add", request: { memories: "The user prefers TypeScript", user_id: "door-user" } },
    { op: "list", request: { user_id: "door-user", filters: { categories: ["fact"] } } },
    { op: "delete", request: { memory_id: missing, user_id: "door-user" } },
    { op: "recall", request: { query: "x", user_id: "door-user", limit: 51 } },
    { op: "forget_user", request: { user_id: "door-user" } },
    { op: "list", request: { user_id: "door-user", limt: 5 } },
    { op: "no_such_operation", request: {} },
    "not json",
  ])) as Array<{ ok?: any; error?: { kind: string; code: string | null; status: number | null; field: string | null; message: string } }>;
  assert.equal(answers.length, 8);
  const [added, listed, deleted, tooMany, forgotten, extra, unknown, bad] = answers;
  assert.equal(added?.ok.ids.length, 1);
  assert.deepEqual(listed?.ok.memories.map((m: { content: string }) => m.content), ["The user prefers TypeScript"]);
  assert.deepEqual(deleted?.error, { kind: "NotFound", code: "not_found", status: 404, field: null, message: "no memory with this id for this user" });
  assert.deepEqual(tooMany?.error, {
    kind: "InvalidInput",
    code: "invalid_input",
    status: 400,
    field: "limit",
    message: "limit: Input should be less than or equal to 50",
  });
  assert.ok(forgotten?.ok.id, JSON.stringify(forgotten));
  assert.deepEqual(extra?.error, { kind: "InvalidInput", code: "invalid_input", status: null, field: "limt", message: "limt: Extra inputs are not permitted" });
  assert.equal(unknown?.error?.kind, "BadLine");
  assert.equal(bad?.error?.kind, "BadLine");
});

test("a 204 answers null; a token is sent as a bearer token", async () => {
  const [added] = (await door([{ op: "add", request: { memories: ["x is y"], user_id: "door-2" } }])) as Array<{ ok: { ids: string[] } }>;
  const [deleted] = await door([{ op: "delete", request: { memory_id: added!.ok.ids[0], user_id: "door-2" } }]);
  assert.deepEqual(deleted, { ok: null });
  // serve without --jwt-issuer reads no token: a bearer token alone names no user.
  const [refused] = (await door([{ op: "list", request: {} }], ["--token", "not-a-jwt"])) as Array<{ error: { kind: string } }>;
  assert.ok(refused?.error, JSON.stringify(refused));
});
