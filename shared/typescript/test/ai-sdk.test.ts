// The AI SDK middleware with the AI SDK's own mock language model, against a real `rushmem
// serve`: the system prompt the model receives, and the conversation handed to the write path.
// Also runs the README's TypeScript example (examples/ai-sdk.ts, which the README quotes verbatim).
// make test runs this file twice: against `ai` 6 (the package's devDependency) and, from ai7/, against
// `ai` 7 under Node 22 (ai-major.ts holds what differs: the mock model of the major's specification).
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, describe, test } from "node:test";
import { generateText, streamText, wrapLanguageModel, type ModelMessage, type UIMessage } from "ai";
import { MemoryClient, ServiceUnavailable, memoryMiddleware, rememberConversation, toChatMessages, type RecallResult } from "rushmem";
import { AI_MAJOR, NODE_MAJOR, SPEC, mockModel, type CallOptions } from "./ai-major.js";
import { PACKAGE, ROOT, readText, startServe, type Serve } from "./support.js";

function systemOf(call: CallOptions | undefined): string[] {
  return (call?.prompt ?? []).filter((m) => m.role === "system").map((m) => m.content as string);
}

let serve: Serve;
let client: MemoryClient;

before(async () => {
  serve = await startServe();
  client = new MemoryClient(serve.url, { timeoutMs: 30_000 });
  await client.add({
    memories: [
      { content: "The user prefers TypeScript", category: "preference" },
      { content: "Every SVG change must be synced to defaultSVG", category: "decision" },
    ],
    user_id: "mw-user",
    project_id: "svg-editor",
  });
});
after(async () => {
  await serve?.stop();
});

describe("memoryMiddleware", () => {
  test(`runs against ai ${AI_MAJOR}, its models' specification ${SPEC}, on Node ${NODE_MAJOR}+`, async () => {
    const installed = JSON.parse(readText(fileURLToPath(import.meta.resolve("ai/package.json")))) as { version: string };
    assert.equal(installed.version.split(".")[0], String(AI_MAJOR), installed.version);
    assert.ok(Number(process.versions.node.split(".")[0]) >= NODE_MAJOR, process.version);
    const model = mockModel();
    const wrapped = wrapLanguageModel({ model, middleware: memoryMiddleware({ client, userId: "mw-user" }) });
    assert.equal(model.specificationVersion, SPEC);
    assert.equal(wrapped.specificationVersion, SPEC, "the middleware is applied to the major's own model interface");
  });

  test("recalls for the latest user message and puts the block at the top of the system prompt", async () => {
    const model = mockModel();
    const recalls: RecallResult[] = [];
    const wrapped = wrapLanguageModel({
      model,
      middleware: memoryMiddleware({ client, userId: "mw-user", projectId: "svg-editor", onRecall: (r) => recalls.push(r) }),
    });
    const { text } = await generateText({
      model: wrapped,
      system: "You are the assistant of an SVG editor.",
      messages: [
        { role: "user", content: "Which language should I write the plugin in, TypeScript?" },
        { role: "assistant", content: "Let me check." },
        { role: "user", content: [{ type: "text", text: "And after I change an SVG, what must I sync? defaultSVG?" }] },
      ],
    });
    assert.equal(text, "OK");
    assert.equal(recalls.length, 1);
    assert.equal(recalls[0]?.query, "And after I change an SVG, what must I sync? defaultSVG?");
    const [system, ...others] = systemOf(model.doGenerateCalls[0]);
    assert.deepEqual(others, [], "one system message");
    assert.ok(system?.startsWith("[RUSH_MEMORY]"), system);
    assert.ok(system?.includes("Every SVG change must be synced to defaultSVG"), system);
    assert.ok(system?.endsWith("\n\nYou are the assistant of an SVG editor."), "the app's own system prompt follows the block");
    assert.equal(system, `${recalls[0]?.prompt_block}\n\nYou are the assistant of an SVG editor.`);
    const users = model.doGenerateCalls[0]!.prompt.filter((m) => m.role === "user");
    assert.equal(users.length, 2, "the conversation itself is untouched");
  });

  test("maxTokens bounds the block the model receives", async () => {
    const model = mockModel();
    const recalls: RecallResult[] = [];
    const middleware = memoryMiddleware({ client, userId: "mw-user", projectId: "svg-editor", maxTokens: 55, onRecall: (r) => recalls.push(r) });
    await generateText({ model: wrapLanguageModel({ model, middleware }), prompt: "TypeScript, and what must I sync to defaultSVG?" });
    // The frame (~42 tokens) and one of the two memories fit in 55; both do not.
    assert.equal(recalls[0]?.memories.length, 1);
    const tokens = recalls[0]?.block_tokens ?? 0;
    assert.ok(tokens > 0 && tokens <= 55, String(tokens));
    assert.equal(systemOf(model.doGenerateCalls[0])[0], recalls[0]?.prompt_block);
  });

  test("without a system prompt the block becomes one; streaming calls recall too", async () => {
    const model = mockModel("streamed");
    const wrapped = wrapLanguageModel({ model, middleware: memoryMiddleware({ client, userId: "mw-user", projectId: "svg-editor" }) });
    const result = streamText({ model: wrapped, prompt: "Should the new plugin be TypeScript?" });
    assert.equal(await result.text, "streamed");
    const prompt = model.doStreamCalls[0]!.prompt;
    assert.equal(prompt[0]?.role, "system");
    assert.ok((prompt[0]?.content as string).startsWith("[RUSH_MEMORY]"));
    assert.ok((prompt[0]?.content as string).includes("The user prefers TypeScript"));
  });

  test("a user with no memories, or a prompt without user text, leaves the prompt as it was", async () => {
    const model = mockModel();
    const wrapped = wrapLanguageModel({ model, middleware: memoryMiddleware({ client, userId: "nobody-yet" }) });
    await generateText({ model: wrapped, system: "Be brief.", prompt: "Hello there" });
    assert.deepEqual(systemOf(model.doGenerateCalls[0]), ["Be brief."]);
  });

  test("a failed recall does not fail the model call (unless asked to)", async () => {
    const dead = new MemoryClient("http://127.0.0.1:1", { retries: 0, timeoutMs: 1000 });
    const errors: unknown[] = [];
    const model = mockModel();
    const wrapped = wrapLanguageModel({ model, middleware: memoryMiddleware({ client: dead, userId: "mw-user", onError: (e) => errors.push(e) }) });
    const { text } = await generateText({ model: wrapped, system: "Be brief.", prompt: "TypeScript?" });
    assert.equal(text, "OK");
    assert.deepEqual(systemOf(model.doGenerateCalls[0]), ["Be brief."]);
    assert.ok(errors[0] instanceof ServiceUnavailable);
    const strict = wrapLanguageModel({ model: mockModel(), middleware: memoryMiddleware({ client: dead, userId: "mw-user", throwOnError: true }) });
    await assert.rejects(generateText({ model: strict, prompt: "TypeScript?", maxRetries: 0 }));
  });

  test("rememberConversation hands the AI SDK conversation to POST /conversations", async () => {
    const model = mockModel("Noted: Vitest for the unit tests.");
    const messages: ModelMessage[] = [{ role: "user", content: "I prefer Vitest for unit tests." }];
    const result = await generateText({ model, messages });
    const chat = [...messages, ...result.response.messages];
    const outcome = await rememberConversation(client, { user_id: "mw-user-2", conversation_id: "c-mw-1", messages: chat });
    assert.equal(outcome.status, "stored");
    assert.ok((outcome.extracted ?? 0) >= 1, JSON.stringify(outcome));
    // What was stored, as stored: each fact's text with its memory's id and what the write did.
    assert.ok(outcome.facts?.some((f) => /Vitest/.test(f.content) && f.action === "created" && (outcome.ids ?? []).includes(f.id)), JSON.stringify(outcome.facts));
    const again = await rememberConversation(client, { user_id: "mw-user-2", conversation_id: "c-mw-1", messages: chat });
    assert.equal(again.status, "duplicate");
    const recalled = await client.recall({ query: "Which unit test runner?", user_id: "mw-user-2" });
    assert.ok(recalled.memories.some((m) => /Vitest/.test(m.content)), JSON.stringify(recalled.memories));
  });
  test("rememberConversation takes useChat's UIMessages: their text parts, reasoning and step markers left out", async () => {
    const messages: UIMessage[] = [
      { id: "u1", role: "user", parts: [{ type: "text", text: "I deploy the SVG editor with Terraform." }] },
      {
        id: "a1",
        role: "assistant",
        parts: [{ type: "step-start" }, { type: "reasoning", text: "The user states a tool." }, { type: "text", text: "Noted: Terraform." }],
      },
    ];
    assert.deepEqual(toChatMessages(messages), [
      { role: "user", content: "I deploy the SVG editor with Terraform." },
      { role: "assistant", content: "Noted: Terraform." },
    ]);
    const outcome = await rememberConversation(client, { user_id: "mw-user-3", conversation_id: "c-mw-ui", messages });
    assert.equal(outcome.status, "stored");
    assert.ok(outcome.facts?.some((f) => /Terraform/.test(f.content)), JSON.stringify(outcome.facts));
  });
});

describe("the README's TypeScript example", () => {
  test("is examples/ai-sdk.ts, verbatim", () => {
    const example = readText(join(PACKAGE, "examples", "ai-sdk.ts")).trim();
    assert.ok(readText(join(ROOT, "README.md")).includes("```ts\n" + example + "\n```"), "README.md quotes examples/ai-sdk.ts");
  });

  test("runs against serve: the memory reaches the model, the conversation reaches the write path", async () => {
    process.env.MEMORY_API_URL = serve.url;
    const { answer, conversationEnded } = await import("../examples/ai-sdk.js");
    const model = mockModel("Use TypeScript.");
    const chat: ModelMessage[] = [{ role: "user", content: "Which language for the new plugin? I like TypeScript." }];
    assert.equal(await answer(model, "mw-user", chat), "Use TypeScript.");
    const system = systemOf(model.doGenerateCalls[0])[0];
    assert.ok(system?.startsWith("[RUSH_MEMORY]") && system.includes("The user prefers TypeScript"), system);
    const outcome = await conversationEnded("readme-user", "c-readme-1", [
      { role: "user", content: "My name is Ana and I work on the SVG editor." },
      { role: "assistant", content: "Nice to meet you, Ana." },
    ]);
    assert.equal(outcome.status, "stored");
    const recalled = await client.recall({ query: "What is the user's name?", user_id: "readme-user", project_id: "svg-editor" });
    assert.ok(recalled.memories.some((m) => /Ana/.test(m.content)), JSON.stringify(recalled.memories));
  });
});
