// What the middleware tests take from the AI SDK major they run against: here `ai` 7, whose models
// implement the language model specification v4 (and which requires Node 22). prepare.mjs puts this
// file in place of test/ai-major.ts (`ai` 6, v3) in the copy of the tests compiled against `ai` 7.
import type { LanguageModelV4CallOptions, LanguageModelV4GenerateResult, LanguageModelV4StreamPart } from "@ai-sdk/provider";
import { MockLanguageModelV4, simulateReadableStream } from "ai/test";

export const AI_MAJOR = 7;
/** The least Node this major runs on (its package.json's engines). */
export const NODE_MAJOR = 22;
/** The specification the major's own models implement (what `wrapLanguageModel` returns). */
export const SPEC = "v4";

export type MockModel = MockLanguageModelV4;
export type CallOptions = LanguageModelV4CallOptions;

const USAGE = {
  inputTokens: { total: 10, noCache: 10, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 5, text: 5, reasoning: undefined },
};

/** The AI SDK's mock model answering `reply`, to generate or to stream. */
export function mockModel(reply = "OK"): MockModel {
  const result: LanguageModelV4GenerateResult = {
    content: [{ type: "text", text: reply }],
    finishReason: { unified: "stop", raw: "stop" },
    usage: USAGE,
    warnings: [],
  };
  const chunks: LanguageModelV4StreamPart[] = [
    { type: "text-start", id: "t" },
    { type: "text-delta", id: "t", delta: reply },
    { type: "text-end", id: "t" },
    { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: USAGE },
  ];
  return new MockLanguageModelV4({
    doGenerate: async () => result,
    doStream: async () => ({ stream: simulateReadableStream({ chunks }) }),
  });
}
