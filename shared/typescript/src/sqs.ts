// The write path from an agent backend: the "conversation ended" message (the body of
// POST /conversations) sent to the ingest queue. @aws-sdk/client-sqs is an optional peer, loaded here only.
import { checkConversation } from "./checks.js";
import { ConfigurationError, InvalidInput, ServiceUnavailable } from "./errors.js";
import type { ConversationRequest } from "./types.js";

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
  checkConversation(message, { userRequired: true });
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
