// AI SDK middleware (`wrapLanguageModel`): every call recalls for the user's latest message and puts
// the [RUSH_MEMORY] block at the top of the system prompt; `rememberConversation` hands the finished
// conversation to the write path. Written against the AI SDK's language model middleware by shape,
// so this package imports nothing of the AI SDK (`ai` is an optional peer: 6 or 7). `ai` 6 calls it
// with specification v3 call options, `ai` 7 with v4 ones (its wrapLanguageModel takes v3 middleware
// and hands it v4 options); the two prompts agree on all this reads and writes (system messages with
// string content, user messages with text parts), so no branch on the version is needed: make test
// runs the middleware's tests against both majors (shared/typescript/ai7 for 7).
import type { MemoryClient } from "./client.js";
import { publishConversationEnded, type PublishOptions } from "./sqs.js";
import type { ChatMessage, ConversationRequest, IngestOutcome, MemoryFilters, RecallResult } from "./openapi.js";

/** A part of a prompt message, as the AI SDK passes them to a model (only text parts are read). */
interface PromptPart {
  type: string;
  text?: string;
}
/** The part of a model call's options this middleware reads and changes: the prompt. */
export interface PromptCall {
  prompt: ReadonlyArray<{ role: string; content: string | ReadonlyArray<PromptPart> }>;
}

export interface MemoryMiddlewareOptions<P extends PromptCall = PromptCall> {
  client: MemoryClient;
  /** Whose memories (a string, or read from the call); leave out with a token client (the token's user). */
  userId?: string | ((params: P) => string | undefined);
  projectId?: string;
  /** Memories in the block (1..50; default the deployment's). */
  limit?: number;
  /** Most tokens the block may hold (counted as the API's docs say): memories join it best first while they fit. */
  maxTokens?: number;
  filters?: MemoryFilters;
  /** Called with each recall (the memories, the block), e.g. to log or show them. */
  onRecall?: (result: RecallResult) => void;
  /** A recall that fails does not fail the model call (memory helps; it must not take the agent
   * down): the call goes on without the block and the error comes here. */
  onError?: (error: unknown) => void;
  /** Fail the model call when the recall fails instead. */
  throwOnError?: boolean;
}

/** The middleware object `wrapLanguageModel` takes: `ai` 6's LanguageModelV3Middleware, which `ai` 7's
 * LanguageModelMiddleware accepts too (any specificationVersion). */
export interface MemoryMiddleware {
  readonly specificationVersion: "v3";
  transformParams<P extends PromptCall>(options: { type: "generate" | "stream"; params: P; model?: unknown }): Promise<P>;
}

function textOf(content: string | ReadonlyArray<PromptPart> | undefined | null): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((p): p is PromptPart & { text: string } => p?.type === "text" && typeof p.text === "string")
    .map((p) => p.text)
    .join("\n");
}

/** The latest user message that has text (the query a recall answers), or undefined. */
export function latestUserText(prompt: PromptCall["prompt"]): string | undefined {
  for (let i = prompt.length - 1; i >= 0; i--) {
    const message = prompt[i];
    if (message?.role !== "user") continue;
    const text = textOf(message.content).trim();
    if (text) return text;
  }
  return undefined;
}

/** The prompt with `block` at the top of its system prompt (the first system message, or a new one). */
export function withMemoryBlock<P extends PromptCall>(params: P, block: string): P {
  const [first, ...rest] = params.prompt;
  if (first?.role === "system" && typeof first.content === "string") {
    const content = first.content ? `${block}\n\n${first.content}` : block;
    return { ...params, prompt: [{ ...first, content }, ...rest] };
  }
  return { ...params, prompt: [{ role: "system", content: block }, ...params.prompt] };
}

/** Memory for any AI SDK model: `wrapLanguageModel({ model, middleware: memoryMiddleware({ client, userId }) })`. */
export function memoryMiddleware<P extends PromptCall = PromptCall>(options: MemoryMiddlewareOptions<P>): MemoryMiddleware {
  return {
    specificationVersion: "v3",
    async transformParams<Q extends PromptCall>({ params }: { type: "generate" | "stream"; params: Q }): Promise<Q> {
      const query = latestUserText(params.prompt);
      if (query === undefined) return params;
      const userId = typeof options.userId === "function" ? options.userId(params as unknown as P) : options.userId;
      let result: RecallResult;
      try {
        result = await options.client.recall({
          query,
          user_id: userId,
          project_id: options.projectId,
          limit: options.limit,
          max_tokens: options.maxTokens,
          filters: options.filters,
        });
      } catch (error) {
        if (options.throwOnError) throw error;
        options.onError?.(error);
        return params;
      }
      options.onRecall?.(result);
      return result.prompt_block ? withMemoryBlock(params, result.prompt_block) : params;
    },
  };
}

/** A message as the AI SDK keeps a conversation: a ModelMessage (content text or parts) or a UIMessage (parts). */
export interface ConversationMessage {
  role: string;
  content?: string | ReadonlyArray<PromptPart>;
  parts?: ReadonlyArray<PromptPart>;
}

const ROLES = new Set(["user", "assistant", "system", "developer", "tool", "function"]);

/** The conversation as the write path takes it: each message's text (tool calls, files and reasoning
 * left out), messages without text dropped. */
export function toChatMessages(messages: readonly ConversationMessage[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  for (const m of messages) {
    const text = textOf(m.content ?? m.parts).trim();
    if (text && ROLES.has(m.role)) out.push({ role: m.role as ChatMessage["role"], content: text });
  }
  return out;
}

/** POST /conversations' request, with the AI SDK's messages. */
export interface Conversation extends Omit<ConversationRequest, "messages"> {
  messages: readonly ConversationMessage[];
}

export interface QueueTarget extends PublishOptions {
  queueUrl: string;
}

/** Hand a finished conversation to the write path: POST /conversations through a client (the
 * outcome: what was stored), or the ingest queue (the SQS message id; `user_id` required). */
export function rememberConversation(to: MemoryClient, conversation: Conversation): Promise<IngestOutcome>;
export function rememberConversation(to: QueueTarget, conversation: Conversation & { user_id: string }): Promise<string>;
export function rememberConversation(to: MemoryClient | QueueTarget, conversation: Conversation): Promise<IngestOutcome | string> {
  const { messages, ...rest } = conversation;
  const chat = toChatMessages(messages);
  if ("queueUrl" in to) {
    const { queueUrl, ...options } = to;
    return publishConversationEnded(queueUrl, { ...rest, user_id: rest.user_id as string, messages: chat }, options);
  }
  return to.ingestConversation({ ...rest, messages: chat });
}
