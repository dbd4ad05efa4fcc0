// The encoder sends what the contract sends (rushmem_contract.operations.Operation.http: the same
// path and query parameters), and the server reads back the request the contract builds from the
// same inputs (Operation.from_http == Operation.build): for a request of every operation, compared
// by the Python contract itself.
import assert from "node:assert/strict";
import { test } from "node:test";
import { OPERATIONS, encodeRequest, type OperationName } from "rushmem";
import { runPython } from "./support.js";

const ID = "7d0c1e4e-3c56-4b4f-9a8e-2f4f6f1b2a10";

const CASES: Array<[string, Record<string, unknown>]> = [
  ["recall", { query: "TypeScript?", user_id: "u", limit: 5, filters: { categories: ["fact", "decision"], metadata: { team: "web" } }, explain_ids: [ID] }],
  ["add", { memories: "The user prefers TypeScript", user_id: "u" }],
  ["add", { memories: ["a fact", { content: "a decision", category: "decision" }], category: "preference", metadata: { a: 1 }, user_id: "u" }],
  [
    "list",
    {
      user_id: "u x+1/ç",
      filters: { categories: ["fact", "decision"], metadata: { team: "web/ui", "a b": "ç", n: [1, { x: true }] }, created_after: "2024-01-01T00:00:00+00:00" },
      include_inactive: true,
      limit: 3,
      as_of: "2024-06-01T12:00:00+02:00",
      consistency: "strong",
    },
  ],
  ["list", { user_id: "u", include_inactive: false, filters: { created_before: "2030-01-01T00:00:00Z" } }],
  ["get", { memory_id: ID, user_id: "u", consistency: "strong" }],
  ["update", { memory_id: ID, user_id: "u", content: "new text", metadata: null, is_evergreen: true }],
  ["delete", { memory_id: ID, user_id: "u" }],
  ["history", { memory_id: ID, user_id: "u", limit: 2, cursor: "abc" }],
  ["export", { user_id: "u", history: true, limit: 5 }],
  ["forget_user", { user_id: "u x+1" }],
  ["review", { pending_id: ID, decision: "approve", user_id: "u" }],
  ["users", { limit: 10 }],
  ["ingest_conversation", { user_id: "u", conversation_id: "c-1", messages: [{ role: "user", content: "I use Neovim." }] }],
  ["get_instructions", { user_id: "u", project_id: "p" }],
  ["set_instructions", { user_id: "u", project_id: "p", instructions: "Keep the tooling.", ignore: ["football"] }],
  ["instructions_history", { user_id: "u", project_id: "p", limit: 2 }],
  ["usage", { user_id: "u", start: "2024-01-01", end: "2024-01-31" }],
  ["erasure", { erasure_id: ID }],
  ["erasures", { user_id: "u" }],
  ["pending", { user_id: "u", project_id: "p", limit: 5 }],
];

const COMPARE = `
import json, sys
from urllib.parse import unquote
from rushmem_contract.operations import BY_NAME

out = []
for case in json.load(sys.stdin):
    op, given, sent = BY_NAME[case["op"]], case["request"], case["sent"]
    expected = op.http(op.build(**given))
    segments = zip(op.path.split("/"), sent["path"].split("/"), strict=True)
    path = {t[1:-1]: unquote(s) for t, s in segments if t.startswith("{")}
    read = op.from_http(path, dict(sent["query"]), sent["body"])
    out.append({
        "path": [sent["path"], expected.path],
        "query": [dict(sent["query"]), expected.query],
        "same_request": read == op.build(**given),
    })
print(json.dumps(out))
`;
test("every operation's request travels as the contract sends it, and reads back as the same request", async () => {
  const camel = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()) as OperationName;
  assert.deepEqual(new Set(CASES.map(([op]) => camel(op))), new Set(Object.keys(OPERATIONS)), "a case for every operation");
  const cases = CASES.map(([op, request]) => {
    const sent = encodeRequest(OPERATIONS[camel(op)], request);
    return { op, request, sent: { path: sent.path, query: sent.query, body: sent.body ?? null } };
  });
  const results = JSON.parse(await runPython(COMPARE, JSON.stringify(cases))) as Array<{
    path: [string, string];
    query: [Record<string, string>, Record<string, string>];
    same_request: boolean;
  }>;
  results.forEach((result, i) => {
    const label = `${CASES[i]![0]} ${JSON.stringify(CASES[i]![1])}`;
    assert.equal(result.path[0], result.path[1], label);
    // The same parameters (their text may differ where the contract normalises: a time in UTC).
    assert.deepEqual(Object.keys(result.query[0]).sort(), Object.keys(result.query[1]).sort(), label);
    assert.ok(result.same_request, label);
  });
});

test("a Date travels as ISO 8601, undefined and null query fields not at all", () => {
  const sent = encodeRequest(OPERATIONS.list, { user_id: "u", as_of: new Date("2024-01-02T03:04:05Z") as never, cursor: null, project_id: undefined });
  assert.deepEqual(sent.query, [
    ["user_id", "u"],
    ["as_of", "2024-01-02T03:04:05.000Z"],
  ]);
  assert.equal(sent.body, undefined);
  const patch = encodeRequest(OPERATIONS.update, { memory_id: ID, user_id: "u", metadata: null, content: undefined });
  assert.deepEqual(patch.body, { metadata: null }, "null travels in a body (it clears)");
  assert.deepEqual(patch.query, [["user_id", "u"]]);
});
