// The checks the write path's model makes first (ConversationEnded), with its limits as the OpenAPI
// document states them (WIRE_LIMITS, generated): a message the service would refuse, or the queue
// consumer dead-letter, is refused here with InvalidInput naming the field, and nothing is sent.
import { InvalidInput } from "./errors.js";
import { WIRE_LIMITS } from "./openapi.js";
import type { ConversationRequest } from "./types.js";

/** Characters as the service counts them (code points, not UTF-16 units). */
function chars(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

function checkText(value: unknown, field: string, max: number, { required = true } = {}): void {
  if (typeof value !== "string" || (required && !value.trim())) {
    throw new InvalidInput(`${field} must be a ${required ? "non-empty " : ""}string`, field);
  }
  if (!value.isWellFormed()) throw new InvalidInput(`${field} contains a lone surrogate, which is not text`, field);
  if (chars(value) > max) throw new InvalidInput(`${field} is longer than ${max} characters`, field);
}

export function checkConversation(message: ConversationRequest, { userRequired }: { userRequired: boolean }): void {
  if (message.user_id != null || userRequired) checkText(message.user_id, "user_id", WIRE_LIMITS.userIdMaxChars);
  if (message.conversation_id != null) {
    checkText(message.conversation_id, "conversation_id", WIRE_LIMITS.conversationIdMaxChars, { required: false });
  }
  const messages = message.messages ?? [];
  const memories = message.memories ?? [];
  if (!messages.length && !memories.length) {
    throw new InvalidInput("the message needs 'messages' or 'memories' (both are empty or missing)", "messages");
  }
  if (messages.length > WIRE_LIMITS.maxMessages) {
    throw new InvalidInput(`messages: at most ${WIRE_LIMITS.maxMessages}`, "messages");
  }
  if (memories.length > WIRE_LIMITS.maxMemories) {
    throw new InvalidInput(`memories: at most ${WIRE_LIMITS.maxMemories}`, "memories");
  }
  const roles: readonly string[] = WIRE_LIMITS.roles;
  messages.forEach((m, i) => {
    if (!roles.includes(m?.role)) throw new InvalidInput(`messages[${i}].role must be one of ${roles.join(", ")}`, `messages[${i}].role`);
    checkText(m.content, `messages[${i}].content`, WIRE_LIMITS.messageMaxChars, { required: false });
  });
  memories.forEach((m, i) => checkText(m?.content, `memories[${i}].content`, WIRE_LIMITS.memoryMaxChars));
}
