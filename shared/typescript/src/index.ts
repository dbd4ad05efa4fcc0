// rushmem: the rushmem API for TypeScript (docs/typescript.md), and memory for AI SDK models.
export { MemoryClient, type Auth, type MemoryClientOptions, type TokenSource } from "./client.js";
export { encodeRequest, type HttpRequest, type OperationSpec, type QueryEncoding } from "./encode.js";
export * from "./errors.js";
export { CLIENT_BASE_DELAY_S, CLIENT_MAX_DELAY_S, CLIENT_RETRIES, RETRY_STATUSES, isRetryableStatus } from "./retry.js";
export type { AwsCredentials, CredentialsProvider } from "./sigv4.js";
export { publishConversationEnded, type ConversationEnded, type PublishOptions, type SqsSender } from "./sqs.js";
export {
  latestUserText,
  memoryMiddleware,
  rememberConversation,
  toChatMessages,
  withMemoryBlock,
  type Conversation,
  type ConversationMessage,
  type MemoryMiddleware,
  type MemoryMiddlewareOptions,
  type PromptCall,
  type QueueTarget,
} from "./ai-sdk.js";
export { OPERATIONS, Operations, PAGES, type OperationName, type PageItems, type PagedOperation, type Requests, type Responses } from "./operations.js";
export * from "./openapi.js";
