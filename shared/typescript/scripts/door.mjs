#!/usr/bin/env node
// The TypeScript client as a door of the cross-door conformance test: each line of standard input,
// {"op": "<operationId>", "request": {...}}, runs through the built client's method for that
// operation (camelCase of the operationId), in order; each prints one line to standard output:
// {"ok": <the answer, null for none>} or {"error": {"kind", "code", "status", "field", "message"}}
// (kind: the error's class, e.g. InvalidInput, NotFound; the others null when the error has none).
//
//   npm run build && node scripts/door.mjs --url http://127.0.0.1:8080 [--token T] < calls.jsonl
//
// A line that is not such a call answers {"error": {"kind": "BadLine", ...}} and the next goes on.
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { MemoryClient, OPERATIONS } from "../dist/index.js";

const { values } = parseArgs({
  options: {
    url: { type: "string" },
    token: { type: "string" },
    retries: { type: "string" },
    "timeout-ms": { type: "string" },
  },
});
if (!values.url) {
  console.error("usage: door.mjs --url URL [--token T] [--retries N] [--timeout-ms MS] < calls.jsonl");
  process.exit(2);
}
const client = new MemoryClient(values.url, {
  ...(values.token !== undefined ? { token: values.token } : {}),
  ...(values.retries !== undefined ? { retries: Number(values.retries) } : {}),
  timeoutMs: values["timeout-ms"] !== undefined ? Number(values["timeout-ms"]) : 60_000,
});

// operationId -> method name (forget_user -> forgetUser), from the generated table.
const METHOD = new Map(Object.entries(OPERATIONS).map(([method, spec]) => [spec.operationId, method]));

function failure(error) {
  const e = error ?? {};
  return {
    error: {
      kind: typeof e.name === "string" && e.name ? e.name : "Error",
      code: e.code ?? null,
      status: e.status ?? null,
      field: e.field ?? null,
      message: typeof e.message === "string" ? e.message : String(error),
    },
  };
}

async function run(line) {
  let call;
  try {
    call = JSON.parse(line);
  } catch (error) {
    return { error: { kind: "BadLine", code: null, status: null, field: null, message: `not JSON: ${error.message}` } };
  }
  const method = METHOD.get(call?.op);
  if (method === undefined) {
    return { error: { kind: "BadLine", code: null, status: null, field: null, message: `no operation ${JSON.stringify(call?.op)}` } };
  }
  try {
    const result = await client[method](call.request ?? {});
    return { ok: result ?? null };
  } catch (error) {
    return failure(error);
  }
}

const write = (text) => new Promise((resolve) => (process.stdout.write(text) ? resolve() : process.stdout.once("drain", resolve)));
for await (const line of createInterface({ input: process.stdin, crlfDelay: Infinity })) {
  if (!line.trim()) continue;
  await write(`${JSON.stringify(await run(line))}\n`);
}
