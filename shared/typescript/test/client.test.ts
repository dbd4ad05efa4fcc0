// Every operation of the API through MemoryClient against a real `rushmem serve`, its typed
// errors as the server words them, and the generated files against the OpenAPI document the server answers.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { after, before, describe, test } from "node:test";
import {
  ConfigurationError,
  Conflict,
  InputTooLarge,
  InvalidInput,
  MemoryClient,
  NotFound,
  ServiceUnavailable,
  type ImportLine,
  type MemoryRecord,
} from "rushmem";
import { PACKAGE, startServe, type Serve } from "./support.js";

let serve: Serve;
let client: MemoryClient;

before(async () => {
  serve = await startServe();
  client = new MemoryClient(serve.url, { timeoutMs: 30_000 });
});
after(async () => {
  await serve?.stop();
});

describe("the generated client", () => {
  test("is what the served OpenAPI document generates (types and operations cannot drift)", () => {
    const run = spawnSync(process.execPath, ["scripts/generate-types.mjs", `${serve.url}/openapi.json`, "--check"], {
      cwd: PACKAGE,
      encoding: "utf8",
    });
    assert.equal(run.status, 0, run.stderr);
  });
});

describe("MemoryClient against serve", () => {
  const user = "ts-user-1";

  test("add (a string, a list, objects), recall (query and messages), search, get", async () => {
    const one = await client.add({ memories: "The user prefers TypeScript", user_id: user, project_id: "svg-editor" });
    assert.equal(one.ids.length, 1);
    assert.equal(one.created, 1);
    assert.ok(one.write_id);
    const stored = await client.add({
      memories: ["The user prefers TypeScript", { content: "Every SVG change must be synced to defaultSVG", category: "decision", is_evergreen: true }],
      user_id: user,
      project_id: "svg-editor",
    });
    assert.equal(stored.ids.length, 2);
    assert.deepEqual(stored.ids[0], one.ids[0], "the same fact twice is one memory");
    assert.equal(stored.created, 1);

    const recalled = await client.recall({ query: "Which language does the user prefer, TypeScript?", user_id: user, project_id: "svg-editor" });
    assert.ok(recalled.prompt_block.startsWith("[RUSH_MEMORY]"), recalled.prompt_block);
    assert.ok(recalled.memories.some((m) => m.content === "The user prefers TypeScript"));
    const searched = await client.search({ query: "Which language does the user prefer, TypeScript?", user_id: user, project_id: "svg-editor" });
    assert.deepEqual(searched.memories.map((m) => m.id), recalled.memories.map((m) => m.id), "search is recall");

    const fromMessages = await client.recall({
      user_id: user,
      project_id: "svg-editor",
      messages: [
        { role: "user", content: "hello" },
        { role: "assistant", content: "hi" },
        { role: "user", content: [{ type: "text", text: "sync the defaultSVG after an SVG change" }] },
      ],
    });
    assert.equal(fromMessages.query, "sync the defaultSVG after an SVG change");
    assert.equal(fromMessages.memories[0]?.content, "Every SVG change must be synced to defaultSVG");

    const got = await client.get({ memory_id: stored.ids[1]!, user_id: user });
    assert.equal(got.category, "decision");
    assert.equal(got.is_evergreen, true);

    const wide = await client.add({ memories: ["The user writes tests first"], category: "preference", metadata: { team: "web" }, user_id: user });
    const written = await client.get({ memory_id: wide.ids[0]!, user_id: user });
    assert.equal(written.category, "preference", "call-wide fields apply to every memory");
    assert.deepEqual(written.metadata, { team: "web" });
  });

  test("list (paged, every page, filtered: lists, objects and dates in the query string), update, history, conflict, delete", async () => {
    const u = "ts-user-2";
    const { ids } = await client.add({
      memories: [
        { content: "The user lives in Lisbon", category: "identity", metadata: { team: "web/ui", "a b": "ç" } },
        { content: "The user prefers pnpm over npm", category: "preference" },
        { content: "The project deploys with SAM", category: "project" },
      ],
      user_id: u,
    });
    const first = await client.list({ user_id: u, limit: 2 });
    assert.equal(first.memories.length, 2);
    assert.ok(first.next_cursor);
    const second = await client.getAll({ user_id: u, limit: 2, cursor: first.next_cursor });
    assert.equal(second.memories.length, 1);
    assert.equal(second.next_cursor, null);

    const all: MemoryRecord[] = [];
    for await (const m of client.pages("list", { user_id: u, limit: 1 })) all.push(m);
    assert.deepEqual(new Set(all.map((m) => m.id)), new Set(ids));

    const web = await client.list({ user_id: u, filters: { metadata: { team: "web/ui", "a b": "ç" } } });
    assert.deepEqual(web.memories.map((m) => m.content), ["The user lives in Lisbon"]);
    const prefs = await client.list({ user_id: u, filters: { categories: ["preference", "project"] } });
    assert.equal(prefs.memories.length, 2);
    const future = await client.list({ user_id: u, filters: { created_after: "2999-01-01T00:00:00+00:00" }, include_inactive: true });
    assert.equal(future.memories.length, 0);

    const updated = await client.update({ memory_id: ids[1]!, user_id: u, content: "The user prefers pnpm", metadata: { source: "ts" } });
    assert.equal(updated.content, "The user prefers pnpm");
    assert.deepEqual(updated.metadata, { source: "ts" });
    const cleared = await client.update({ memory_id: ids[1]!, user_id: u, metadata: null });
    assert.deepEqual(cleared.metadata, {}, "null travels in the body: it clears");
    const history = await client.history({ memory_id: ids[1]!, user_id: u });
    assert.deepEqual(history.events.map((e) => e.event).slice(0, 2), ["created", "updated"]);
    const events = [];
    for await (const e of client.pages("history", { memory_id: ids[1]!, user_id: u, limit: 1 })) events.push(e);
    assert.deepEqual(events.map((e) => e.event), history.events.map((e) => e.event));

    await assert.rejects(client.update({ memory_id: ids[1]!, user_id: u, content: "The user lives in Lisbon" }), (e: unknown) => {
      assert.ok(e instanceof Conflict && e instanceof InvalidInput);
      assert.equal(e.field, "content");
      assert.equal(e.status, 409);
      return true;
    });

    assert.equal(await client.delete({ memory_id: ids[2]!, user_id: u }), undefined);
    await assert.rejects(client.delete({ memory_id: ids[2]!, user_id: u }), NotFound, "a second delete finds nothing");
    await assert.rejects(client.get({ memory_id: ids[2]!, user_id: u }), NotFound);
    await assert.rejects(client.get({ memory_id: ids[0]!, user_id: "someone-else" }), NotFound, "another user's id looks missing");
  });

  test("export (with history), conversations, usage, instructions, pending, users, forget the user and read the receipts", async () => {
    const u = "ts-user-3";
    await client.add({ memories: "The user speaks Portuguese", user_id: u });
    const page = await client.export({ user_id: u, history: true, limit: 1 });
    assert.equal(page.lines.length, 1);
    const lines: ImportLine[] = [];
    for await (const line of client.pages("export", { user_id: u, history: true, limit: 1 })) lines.push(line);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.content, "The user speaks Portuguese");
    assert.equal(lines[0]?.history?.[0]?.event, "created");

    const chat = [
      { role: "user" as const, content: "I prefer Vitest for unit tests." },
      { role: "assistant" as const, content: "Noted, Vitest it is." },
    ];
    const outcome = await client.ingestConversation({ messages: chat, user_id: u, conversation_id: "c-ts-1" });
    assert.equal(outcome.status, "stored");
    assert.ok((outcome.created ?? 0) >= 1, JSON.stringify(outcome));
    const duplicate = await client.ingestConversation({ messages: chat, user_id: u, conversation_id: "c-ts-1" });
    assert.equal(duplicate.status, "duplicate");
    const recalled = await client.recall({ query: "which unit test runner?", user_id: u });
    assert.ok(recalled.memories.some((m) => /Vitest/.test(m.content)), JSON.stringify(recalled.memories));

    const day = (daysAgo: number) => new Date(Date.now() - daysAgo * 86_400_000).toISOString().slice(0, 10);
    const usage = await client.usage({ user_id: u, start: day(7), end: day(0) });
    assert.equal(usage.user_id, u);
    assert.ok(usage.lines.some((l) => l.kind === "recall"), JSON.stringify(usage.lines));

    const set = await client.setInstructions({ user_id: u, project_id: "p", instructions: "Keep the user's tooling.", ignore: ["football"] });
    assert.equal(set.version, 1);
    assert.deepEqual((await client.getInstructions({ user_id: u, project_id: "p" })).instructions.ignore, ["football"]);
    assert.equal((await client.instructionsHistory({ user_id: u, project_id: "p" })).versions.length, 1);
    assert.deepEqual((await client.pending({ user_id: u })).memories, []);
    assert.ok((await client.users({ limit: 500 })).users.some((x) => x.user_id === u));

    const receipt = await client.forgetUser({ user_id: u });
    assert.ok((receipt.deleted.memories ?? 0) >= 2, JSON.stringify(receipt));
    assert.deepEqual(await client.erasure({ erasure_id: receipt.id }), receipt);
    assert.deepEqual((await client.erasures({ user_id: u })).receipts.map((r) => r.id), [receipt.id]);
    assert.equal((await client.list({ user_id: u })).memories.length, 0);
    await assert.rejects(client.erasure({ erasure_id: "00000000-0000-4000-8000-000000000000" }), NotFound);
  });
});

describe("examples/client.ts (docs/typescript.md's tour)", () => {
  test("runs against serve", async () => {
    process.env.MEMORY_API_URL = serve.url;
    const { tour } = await import("../examples/client.js");
    const seen = await tour("example-user");
    assert.ok(seen.prompt_block.startsWith("[RUSH_MEMORY]") && seen.prompt_block.includes("TypeScript"), seen.prompt_block);
    assert.deepEqual(seen.decisions.map((m) => m.content), ["Every SVG change syncs to defaultSVG"]);
    assert.equal(seen.updated.content, "The user prefers TypeScript, strict");
    assert.equal(seen.gone, null);
    assert.deepEqual(seen.all.map((m) => m.content).sort(), ["Every SVG change syncs to defaultSVG", "The user deploys with SAM"]);
  });
});

describe("errors come back typed, as the server words them", () => {
  test("invalid input names the field", async () => {
    await assert.rejects(client.recall({ query: "x", user_id: "u", limit: 51 }), (e: unknown) => {
      assert.ok(e instanceof InvalidInput);
      assert.equal(e.field, "limit");
      assert.equal(e.code, "invalid_input");
      assert.equal(e.message, "limit: Input should be less than or equal to 50");
      assert.ok(e.requestId, "the request id finds the server's logs");
      return true;
    });
    await assert.rejects(client.recall({ query: "x" }), (e: unknown) => e instanceof InvalidInput && e.field === "user_id");
    await assert.rejects(client.add({ memories: [{ content: "x", category: "mood" as never }], user_id: "u" }), (e: unknown) => {
      assert.ok(e instanceof InvalidInput);
      assert.equal(e.field, "memories[0].category");
      return true;
    });
    // Refused by the server now (the client checks nothing it can send): same kind, field and words.
    await assert.rejects(client.ingestConversation({ messages: [], user_id: "u" }), (e: unknown) => e instanceof InvalidInput && e.status === 400);
    await assert.rejects(client.get({ memory_id: "not-a-uuid", user_id: "u" }), (e: unknown) => {
      assert.ok(e instanceof InvalidInput && e.status === 400);
      assert.equal(e.field, "memory_id");
      assert.equal(e.message, "memory_id: Input should be a valid UUID, invalid character: found `n` at 0");
      return true;
    });
    await assert.rejects(client.list({ user_id: "u", filters: { categories: ["mood" as never] } }), (e: unknown) => {
      assert.ok(e instanceof InvalidInput && e.status === 400);
      assert.equal(e.field, "filters.categories[0]");
      return true;
    });
    await assert.rejects(client.add({ memories: "x", user_id: "u", bogus: 1 } as never), (e: unknown) => {
      assert.ok(e instanceof InvalidInput && e.status === 400, "an unknown body field reaches the server");
      assert.equal(e.message, "bogus: Extra inputs are not permitted");
      return true;
    });
  });

  test("what a URL cannot carry is refused before sending, in the contract's words", async () => {
    const refused = async (call: Promise<unknown>, field: string, message: string) =>
      assert.rejects(call, (e: unknown) => {
        assert.ok(e instanceof InvalidInput);
        assert.equal(e.status, undefined, "nothing was sent");
        assert.equal(e.code, "invalid_input");
        assert.equal(e.field, field);
        assert.equal(e.message, message);
        return true;
      });
    await refused(client.get({ user_id: "u" } as never), "memory_id", "memory_id: Field required");
    await refused(client.delete({ memory_id: "", user_id: "u" }), "memory_id", "memory_id: Input should be a valid UUID, invalid length: found 0");
    await refused(client.delete({ memory_id: "..", user_id: "u" }), "memory_id", "memory_id: Input should be a valid UUID, invalid character: found `.` at 0");
    await refused(client.list({ user_id: "u", limt: 5 } as never), "limt", "limt: Extra inputs are not permitted");
    await refused(client.list({ user_id: "u", filters: { categoriez: ["fact"] } as never }), "filters.categoriez", "filters.categoriez: Extra inputs are not permitted");
    await refused(client.list({ user_id: "u", filters: "fact" as never }), "filters", "filters: Input should be a valid dictionary or instance of MemoryFilters");
    await refused(client.list({ user_id: "u", filters: { categories: "fact" as never } }), "filters.categories", "filters.categories: Input should be a valid list");
  });

  test("too large", async () => {
    await assert.rejects(client.recall({ query: "word ".repeat(1000), user_id: "u" }), (e: unknown) => {
      assert.ok(e instanceof InputTooLarge && e instanceof InvalidInput);
      assert.equal(e.status, 413);
      return true;
    });
  });

  test("a wrong URL is a configuration error, an unreachable one unavailable after the retries", async () => {
    const wrong = new MemoryClient(`${serve.url}/v1`);
    await assert.rejects(wrong.recall({ query: "x", user_id: "u" }), ConfigurationError);
    assert.throws(() => new MemoryClient("ftp://example.com"), ConfigurationError);
    assert.throws(() => new MemoryClient(serve.url, { auth: "jwt" }), ConfigurationError);
    const dead = new MemoryClient(`http://127.0.0.1:1`, { retries: 1, timeoutMs: 2000 });
    await assert.rejects(dead.recall({ query: "x", user_id: "u" }), ServiceUnavailable);
  });
});
