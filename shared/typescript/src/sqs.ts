// The write path from an agent backend: the "conversation ended" message (the body of
// POST /conversations) sent to the ingest queue. @aws-sdk/client-sqs is an optional peer, loaded here only.
import { ConfigurationError, InvalidInput, ServiceUnavailable } from "./errors.js";
import { WIRE_LIMITS, type ConversationRequest } from "./openapi.js";

/** The message IngestFunction reads: a user (required on the queue) and messages and/or memories. */
export type ConversationEnded = ConversationRequest & { user_id: string };

/** What publishConversationEnded needs of an SQS client: the AWS SDK's SQSClient has it. */
export interface SqsSender {
  send(command: never): Promise<{ MessageId?: string }>;
}

export interface PublishOptions {
  /** Default: from the queue URL (sqs.<region>.amazonaws.com), else the SDK's configuration. */
  region?: string;
  /** An SQSClient of your own (endpoint, credentials, retries); default a new one. */
  sqs?: SqsSender;
}

// The checks the write path's model makes first (ConversationEnded), with its limits as the OpenAPI
// document states them (WIRE_LIMITS, generated): no server sees a queued message before the consumer,
// so a message it would refuse (and dead-letter) is refused here, naming the field, and nothing is sent.
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

function checkConversation(message: ConversationEnded): void {
  checkText(message.user_id, "user_id", WIRE_LIMITS.userIdMaxChars);
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

// Web Crypto, not node:crypto: the package imports nothing of Node's own modules (edge runtimes).
async function sha256Hex(text: string): Promise<string> {
  const digest = await globalThis.crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

const SQS_HOST = /^sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/;
const THROTTLED = new Set(["RequestThrottled", "ThrottlingException", "KmsThrottled"]);
const CONFIGURATION = new Set([
  "AWS.SimpleQueueService.NonExistentQueue",
  "QueueDoesNotExist",
  "AccessDenied",
  "AccessDeniedException",
  "InvalidClientTokenId",
  "UnrecognizedClientException",
  "InvalidAddress",
  "KmsAccessDenied",
  "KmsDisabled",
  "KmsNotFound",
  "CredentialsProviderError",
]);

/** Send the write-path message to the ingest queue; the SQS MessageId. A FIFO queue gets the user as
 * message group and the conversation (or the body's hash) as deduplication id, as the Python client. */
export async function publishConversationEnded(queueUrl: string, message: ConversationEnded, options: PublishOptions = {}): Promise<string> {
  checkConversation(message);
  const body = JSON.stringify(Object.fromEntries(Object.entries(message).filter(([, v]) => v !== undefined && v !== null)));
  if (!body.isWellFormed()) throw new InvalidInput("the message contains a lone surrogate, which is not text");
  let sqs: typeof import("@aws-sdk/client-sqs");
  try {
    sqs = await import("@aws-sdk/client-sqs");
  } catch (cause) {
    throw new ConfigurationError("publishConversationEnded needs the optional package @aws-sdk/client-sqs: npm install @aws-sdk/client-sqs", { cause });
  }
  const fifo = queueUrl.endsWith(".fifo");
  const command = new sqs.SendMessageCommand({
    QueueUrl: queueUrl,
    MessageBody: body,
    ...(fifo
      ? {
          MessageGroupId: message.user_id,
          MessageDeduplicationId: await sha256Hex(message.conversation_id || body),
        }
      : {}),
  });
  let host = "";
  try {
    host = new URL(queueUrl).hostname.toLowerCase();
  } catch {
    throw new ConfigurationError(`not a queue URL: ${JSON.stringify(queueUrl)}`);
  }
  const client: SqsSender = options.sqs ?? new sqs.SQSClient({ region: options.region ?? SQS_HOST.exec(host)?.[1] });
  try {
    const answer = await client.send(command as never);
    return String(answer.MessageId);
  } catch (error) {
    throw sqsError(error);
  }
}

function sqsError(error: unknown): Error {
  const e = error as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  const code = String(e?.name ?? "Error");
  const text = `SQS: ${code}: ${e?.message ?? String(error)}`;
  const status = e?.$metadata?.httpStatusCode ?? 0;
  if (status >= 500 || THROTTLED.has(code)) return new ServiceUnavailable(text, { cause: error });
  if (CONFIGURATION.has(code) || status === 403) return new ConfigurationError(text, { cause: error });
  if (status === 0) return new ServiceUnavailable(text, { cause: error }); // no answer: unreachable
  // The rest is about the message itself (e.g. larger than the queue's MaximumMessageSize).
  return new InvalidInput(text, undefined, { cause: error });
}
