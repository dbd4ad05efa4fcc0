import { generateText, wrapLanguageModel, type ModelMessage } from "ai";
import { MemoryClient, memoryMiddleware, rememberConversation } from "rushmem";

// `rushmem serve` locally; in AWS the API's execute-api URL (SigV4) or a token client.
const memory = new MemoryClient(process.env.MEMORY_API_URL ?? "http://127.0.0.1:8080");

// Any AI SDK model: a LanguageModelV3 (`ai` 6) or V4 (`ai` 7) from a provider.
type Model = Parameters<typeof wrapLanguageModel>[0]["model"];

export async function answer(model: Model, userId: string, chat: ModelMessage[]): Promise<string> {
  const { text } = await generateText({
    // Each call recalls for the user's latest message; the [RUSH_MEMORY] block tops the system prompt.
    model: wrapLanguageModel({ model, middleware: memoryMiddleware({ client: memory, userId, projectId: "svg-editor" }) }),
    system: "You are the assistant of an SVG editor.",
    messages: chat,
  });
  return text;
}

export async function conversationEnded(userId: string, conversationId: string, chat: ModelMessage[]) {
  // The write path extracts what is worth keeping (or: rememberConversation({ queueUrl }, ...) for SQS).
  return rememberConversation(memory, { user_id: userId, project_id: "svg-editor", conversation_id: conversationId, messages: chat });
}
