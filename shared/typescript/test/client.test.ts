// Every operation of the API through MemoryClient against a real `rushmem serve`, its typed
// errors, and the generated types against the OpenAPI document the server answers.
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

describe("the generated types", () => {
  test("are what the served OpenAPI document generates (they cannot drift)", () => {
    const run = spawnSync(process.execPath, ["scripts/generate-types.mjs", `${serve.url}/openapi.json`, "--check"], {
      cwd: PACKAGE,
      encoding: "utf8",
    });
    assert.equal(run.status, 0, run.stderr);
  });
});

describe("MemoryClient against serve", () => {
  const user = "ts-user-1";

  test("add, recall (query and messages), get", async () => {
    const stored = await client.add(
      ["The user prefers TypeScript", { content: "Every SVG change must be synced to defaultSVG", category: "decision", is_evergreen: true }],
      { user_id: user, project_id: "svg-editor" },
    );
    assert.equal(stored.ids.length, 2);
    assert.equal(stored.created, 2);
    assert.ok(stored.write_id);

    const again = await client.add(["The user prefers TypeScript"], { user_id: user, project_id: "svg-editor" });
    assert.deepEqual(again.ids, [stored.ids[0]], "the same fact twice is one memory");

    const recalled = await client.recall({ query: "Which language does the user prefer, TypeScript?", user_id: user, project_id: "svg-editor" });
    assert.ok(recalled.prompt_block.startsWith("[RUSH_MEMORY]"), recalled.prompt_block);
    assert.ok(recalled.memories.some((m) => m.content === "The user prefers TypeScript"));

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

    const one = await client.getMemory(stored.ids[1]!, { user_id: user });
    assert.equal(one.category, "decision");
    assert.equal(one.is_evergreen, true);
  });

  test("list (paged, iterated, filtered), update, history, conflict, forget", async () => {
    const u = "ts-user-2";
    const { ids } = await client.add(
      [
        { content: "The user lives in Lisbon", category: "identity", metadata: { team: "web" } },
        { content: "The user prefers pnpm over npm", category: "preference" },
        { content: "The project deploys with SAM", category: "project" },
      ],
      { user_id: u },
    );
    const first = await client.listMemories({ user_id: u, limit: 2 });
    assert.equal(first.memories.length, 2);
    assert.ok(first.next_cursor);
    assert.equal([...first].length, 2, "a page is iterable");
    const second = await client.listMemories({ user_id: u, limit: 2, cursor: first.next_cursor });
    assert.equal(second.memories.length, 1);
    assert.equal(second.next_cursor, null);

    const all: MemoryRecord[] = [];
    for await (const m of client.iterMemories({ user_id: u })) all.push(m);
    assert.deepEqual(new Set(all.map((m) => m.id)), new Set(ids));

    const web = await client.listMemories({ user_id: u, filters: { metadata: { team: "web" } } });
    assert.deepEqual(web.memories.map((m) => m.content), ["The user lives in Lisbon"]);
    const prefs = await client.listMemories({ user_id: u, filters: { categories: ["preference", "project"] } });
    assert.equal(prefs.memories.length, 2);

    const updated = await client.updateMemory(ids[1]!, { content: "The user prefers pnpm", metadata: { source: "ts" } }, { user_id: u });
    assert.equal(updated.content, "The user prefers pnpm");
    assert.deepEqual(updated.metadata, { source: "ts" });
    const events = await client.history(ids[1]!, { user_id: u });
    assert.deepEqual(events.map((e) => e.event), ["created", "updated"]);

    await assert.rejects(client.updateMemory(ids[1]!, { content: "The user lives in Lisbon" }, { user_id: u }), (e: unknown) => {
      assert.ok(e instanceof Conflict && e instanceof InvalidInput);
      assert.equal(e.field, "content");
      assert.equal(e.status, 409);
      return true;
    });

    assert.equal(await client.forgetMemory(ids[2]!, { user_id: u }), true);
    assert.equal(await client.forgetMemory(ids[2]!, { user_id: u }), false, "a second forget finds nothing");
    await assert.rejects(client.getMemory(ids[2]!, { user_id: u }), NotFound);
    await assert.rejects(client.getMemory(ids[0]!, { user_id: "someone-else" }), NotFound, "another user's id looks missing");
  });

  test("export (with history), conversations, usage, forget the user and read the receipt", async () => {
    const u = "ts-user-3";
    await client.add(["The user speaks Portuguese"], { user_id: u });
    const lines: ImportLine[] = [];
    for await (const line of client.exportMemories({ user_id: u, history: true, page_size: 1 })) lines.push(line);
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.content, "The user speaks Portuguese");
    assert.equal(lines[0]?.history?.[0]?.event, "created");

    const chat = [
      { role: "user" as const, content: "I prefer Vitest for unit tests." },
      { role: "assistant" as const, content: "Noted, Vitest it is." },
    ];
    const outcome = await client.addMessages(chat, { user_id: u, conversation_id: "c-ts-1" });
    assert.equal(outcome.status, "stored");
    assert.ok((outcome.created ?? 0) >= 1, JSON.stringify(outcome));
    const duplicate = await client.addMessages(chat, { user_id: u, conversation_id: "c-ts-1" });
    assert.equal(duplicate.status, "duplicate");
    const recalled = await client.recall({ query: "which unit test runner?", user_id: u });
    assert.ok(recalled.memories.some((m) => /Vitest/.test(m.content)), JSON.stringify(recalled.memories));

    const usage = await client.usage({ user_id: u });
    assert.equal(usage.user_id, u);
    assert.ok(usage.lines.some((l) => l.kind === "recall"), JSON.stringify(usage.lines));

    const receipt = await client.forgetUser(u);
    assert.ok((receipt.deleted.memories ?? 0) >= 2, JSON.stringify(receipt));
    assert.deepEqual(await client.erasure(receipt.id), receipt);
    assert.equal((await client.listMemories({ user_id: u })).memories.length, 0);
    await assert.rejects(client.erasure("00000000-0000-4000-8000-000000000000"), NotFound);
  });
});

describe("errors come back typed, naming the field", () => {
  test("invalid input", async () => {
    await assert.rejects(client.recall({ query: "x", user_id: "u", limit: 51 }), (e: unknown) => {
      assert.ok(e instanceof InvalidInput);
      assert.equal(e.field, "limit");
      assert.equal(e.code, "invalid_input");
      assert.ok(e.requestId, "the request id finds the server's logs");
      return true;
    });
    await assert.rejects(client.recall({ query: "x" }), (e: unknown) => e instanceof InvalidInput && e.field === "user_id");
    await assert.rejects(client.add([{ content: "x", category: "mood" as never }], { user_id: "u" }), (e: unknown) => {
      assert.ok(e instanceof InvalidInput);
      assert.equal(e.field, "memories[0].category");
      return true;
    });
    await assert.rejects(client.addMessages([], { user_id: "u" }), InvalidInput, "refused before sending");
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
    const port = new URL(serve.url).port;
    const dead = new MemoryClient(`http://127.0.0.1:1`, { retries: 1, timeoutMs: 2000 });
    await assert.rejects(dead.recall({ query: "x", user_id: "u" }), ServiceUnavailable);
    assert.ok(port);
  });
});
