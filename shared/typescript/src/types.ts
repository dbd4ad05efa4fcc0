// The API's requests and answers, by name: every one is the generated type (src/openapi.ts, from the
// API's OpenAPI document), never restated by hand.
import type { components, operations } from "./openapi.js";

type Schemas = components["schemas"];
type Query<Op extends keyof operations> = NonNullable<operations[Op]["parameters"]["query"]>;

export type RecallRequest = Schemas["RecallRequest"];
export type RecallMessage = Schemas["RecallMessage"];
export type RecallResult = Schemas["RecallResult"];
export type RecalledMemory = Schemas["RecalledMemory"];
export type MemoryFilters = Schemas["MemoryFilters"];
export type AddRequest = Schemas["AddRequest"];
export type NewMemory = Schemas["NewMemory"];
export type StoredIds = Schemas["StoredIds"];
export type FactOutcome = Schemas["FactOutcome"];
export type MemoryRecord = Schemas["MemoryRecord"];
export type MemoryPage = Schemas["MemoryPage"];
export type MemoryChanges = Schemas["MemoryChanges"];
export type MemoryEvent = Schemas["MemoryEvent"];
export type ExportPage = Schemas["ExportPage"];
export type ImportLine = Schemas["ImportLine"];
export type ConversationRequest = Schemas["ConversationRequest"];
export type ChatMessage = Schemas["ChatMessage"];
export type IngestOutcome = Schemas["IngestOutcome"];
export type ErasureReceipt = Schemas["ErasureReceipt"];
export type UsageReport = Schemas["UsageReport"];
export type UsageLine = Schemas["UsageLine"];
export type ErrorBody = Schemas["ErrorBody"];
export type Category = NewMemory["category"] & string;
export type Consistency = NonNullable<RecallRequest["consistency"]>;

/** GET /memories' query, with the filters as one object (as in a recall) instead of strings. */
export type ListQuery = Omit<Query<"list_memories_memories_get">, "categories" | "metadata" | "created_after" | "created_before"> & {
  filters?: MemoryFilters | null;
};
export type GetQuery = Query<"get_memory_memories__memory_id__get">;
export type UserQuery = Query<"forget_memory_memories__memory_id__delete">;
export type HistoryQuery = Query<"memory_history_memories__memory_id__history_get">;
/** GET /memories/export's query but the cursor (the export follows it) and the page size. */
export type ExportQuery = Omit<Query<"export_memories_memories_export_get">, "cursor" | "limit"> & { page_size?: number };
export type UsageQuery = Query<"usage_usage_get">;
/** POST /memories' body but the memories, which may also be plain strings (each a fact). */
export type AddOptions = Omit<AddRequest, "memories">;
/** POST /conversations' body but the messages. */
export type ConversationOptions = Omit<ConversationRequest, "messages">;
