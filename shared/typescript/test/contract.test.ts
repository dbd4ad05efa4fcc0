// The client's error kinds, retry policy and methods are the Python contract's (rushmem_contract.kinds,
// .retry, and .methods: the Python doors' method names), compared here with the Python itself; and the retries do what the policy says,
// against a stand-in for API Gateway that answers what the service's own 503 and a throttle answer.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import {
  AgentMemoryError,
  CLIENT_BASE_DELAY_S,
  CLIENT_MAX_DELAY_S,
  CLIENT_RETRIES,
  DatabaseUnavailable,
  ERROR_KINDS,
  MemoryClient,
  OPERATIONS,
  Operations,
  RETRY_STATUSES,
  ServiceUnavailable,
  isRetryableStatus,
} from "rushmem";
import { runPython } from "./support.js";

test("ERROR_KINDS and RETRY_STATUSES are the Python contract's", async () => {
  const python = JSON.parse(
    await runPython(
      [
        "import json",
        "from rushmem_contract import kinds, retry",
        "print(json.dumps({'kinds': [[k.code, k.status, k.error.__name__, k.retryable] for k in kinds.ERROR_KINDS],",
        "  'retry': sorted(int(s) for s in retry.RETRY_STATUSES),",
        "  'client': [retry.CLIENT_RETRIES, retry.CLIENT_BASE_DELAY_S, retry.CLIENT_MAX_DELAY_S]}))",
      ].join("\n"),
    ),
  ) as { kinds: [string, number, string, boolean][]; retry: number[]; client: number[] };
  const ours = ERROR_KINDS.map((k) => [k.code, k.status, k.error.name, isRetryableStatus(k.status)]);
  assert.deepEqual(ours, python.kinds);
  assert.deepEqual([...RETRY_STATUSES].sort(), python.retry);
  assert.deepEqual([CLIENT_RETRIES, CLIENT_BASE_DELAY_S, CLIENT_MAX_DELAY_S], python.client);
});

test("the client's methods are the Python doors' (the table's rows and mem0's aliases), camelCase", async () => {
  const python = JSON.parse(
    await runPython(
      [
        "import json",
        "from rushmem_contract.methods import Method, Operations",
        "from rushmem_contract.operations import OPERATIONS",
        "methods = {name: m.op.name for name, m in vars(Operations).items() if isinstance(m, Method)}",
        "print(json.dumps({'methods': methods, 'rows': [op.name for op in OPERATIONS]}))",
      ].join("\n"),
    ),
  ) as { methods: Record<string, string>; rows: string[] };
  const camel = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  const ours = Object.getOwnPropertyNames(Operations.prototype).filter((name) => name !== "constructor");
  assert.deepEqual(ours.sort(), Object.keys(python.methods).map(camel).sort());
  assert.deepEqual(Object.values(OPERATIONS).map((spec) => spec.operationId).sort(), [...python.rows].sort());
  // Each method runs its row (an alias its target's), as the Python one does.
  class Recorder extends Operations {
    ran: string[] = [];
    protected async invoke(name: string): Promise<never> {
      this.ran.push(name);
      return undefined as never;
    }
  }
  const recorder = new Recorder();
  for (const [name, row] of Object.entries(python.methods)) {
    await (recorder as unknown as Record<string, (request: object) => Promise<unknown>>)[camel(name)]!({});
    assert.equal(recorder.ran.at(-1), camel(row), name);
  }
  assert.ok(new MemoryClient("http://127.0.0.1:1") instanceof Operations);
});

async function stub(answers: Array<[number, Record<string, string>, unknown]>) {
  const seen: number[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    const [status, headers, body] = answers[Math.min(seen.length, answers.length - 1)]!;
    seen.push(Date.now());
    res.writeHead(status, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, seen, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const RECALLED = { memories: [], prompt_block: "", query: "x" };
const UNAVAILABLE = { code: "database_unavailable", message: "the database is unavailable; try again shortly" };

test("a 503 is retried after its Retry-After, and the answer that follows is returned", async () => {
  const s = await stub([
    [503, { "retry-after": "1" }, UNAVAILABLE],
    [200, {}, RECALLED],
  ]);
  try {
    const result = await new MemoryClient(s.url, { retries: 2 }).recall({ query: "x", user_id: "u" });
    assert.deepEqual(result, RECALLED);
    assert.equal(s.seen.length, 2);
    assert.ok(s.seen[1]! - s.seen[0]! >= 950, "waited what Retry-After asked");
  } finally {
    await s.close();
  }
});

test("when the retries run out, the last answer's typed error", async () => {
  const s = await stub([[503, { "retry-after": "0" }, UNAVAILABLE]]);
  try {
    await assert.rejects(new MemoryClient(s.url, { retries: 2 }).recall({ query: "x", user_id: "u" }), DatabaseUnavailable);
    assert.equal(s.seen.length, 3, "one try and two retries");
  } finally {
    await s.close();
  }
  const t = await stub([[429, {}, { message: "Too Many Requests" }]]);
  try {
    await assert.rejects(new MemoryClient(t.url, { retries: 1 }).recall({ query: "x", user_id: "u" }), ServiceUnavailable);
    assert.equal(t.seen.length, 2, "API Gateway's throttle is retried");
  } finally {
    await t.close();
  }
});

test("a 500 is not retried (an internal or configuration error is not passing)", async () => {
  const s = await stub([[500, {}, { code: "internal_error", message: "internal error (see the service logs)" }]]);
  try {
    await assert.rejects(new MemoryClient(s.url, { retries: 2 }).recall({ query: "x", user_id: "u" }), (e: unknown) => {
      assert.ok(e instanceof AgentMemoryError);
      assert.equal(e.code, "internal_error");
      return true;
    });
    assert.equal(s.seen.length, 1);
  } finally {
    await s.close();
  }
});
