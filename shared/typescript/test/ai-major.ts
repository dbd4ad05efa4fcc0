// What the middleware tests take from the AI SDK major they run against: here `ai` 6, whose models
// implement the language model specification v3. ai7/ai-major.ts takes this file's place when the
// same tests run against `ai` 7 (specification v4, Node 22): make test runs both.
import type { LanguageModelV3CallOptions, LanguageModelV3GenerateResult, LanguageModelV3StreamPart } from "@ai-sdk/provider";
import { MockLanguageModelV3, simulateReadableStream } from "ai/test";

export const AI_MAJOR = 6;
/** The least Node this major runs on (its package.json's engines). */
export const NODE_MAJOR = 18;
/** The specification the major's own models implement (what `wrapLanguageModel` returns). */
export const SPEC = "v3";

export type MockModel = MockLanguageModelV3;
export type CallOptions = LanguageModelV3CallOptions;

const USAGE = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** The AI SDK's mock model answering `reply`, to generate or to stream. */
export function mockModel(reply = "OK"): MockModel {
  const result: LanguageModelV3GenerateResult = {
    content: [{ type: "text", text: reply }],
    finishReason: { unified: "stop", raw: "stop" },
    usage: USAGE,
    warnings: [],
  };
  const chunks: LanguageModelV3StreamPart[] = [
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: reply },
    { type: "text-end", id: "t" },
    { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: USAGE },
  ];
  return new MockLanguageModelV3({
    doGenerate: async () => result,
    doStream: async () => ({ stream: simulateReadableStream({ chunks }) }),
  });
}
