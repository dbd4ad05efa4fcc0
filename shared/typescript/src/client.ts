// The memory API over HTTP: every operation of the API (docs/api.md), with the Python client's
// semantics (rushmem_client): the same auth rules, error kinds and retry policy.
import { checkConversation } from "./checks.js";
import { AgentMemoryError, ConfigurationError, InvalidInput, NotFound, ServiceUnavailable, errorFromAnswer } from "./errors.js";
import { CLIENT_BASE_DELAY_S, CLIENT_MAX_DELAY_S, CLIENT_RETRIES, backoff, isRetryableStatus, parseRetryAfter } from "./retry.js";
import { type AwsCredentials, type CredentialsProvider, SigV4Signer } from "./sigv4.js";
import type {
  AddOptions,
  ChatMessage,
  ConversationOptions,
  ErasureReceipt,
  ExportPage,
  ExportQuery,
  GetQuery,
  HistoryQuery,
  ImportLine,
  IngestOutcome,
  InstructionsHistoryQuery,
  InstructionsQuery,
  InstructionsRequest,
  ListQuery,
  MemoryChanges,
  MemoryEvent,
  MemoryFilters,
  MemoryPage,
  MemoryRecord,
  NewMemory,
  PendingMemory,
  PendingQuery,
  RecallRequest,
  RecallResult,
  ReviewDecision,
  ReviewOutcome,
  StoredIds,
  StoredInstructions,
  UserCount,
  UsersQuery,
  UsageQuery,
  UsageReport,
  UserQuery,
} from "./types.js";

export type Auth = "iam" | "jwt" | "none";
/** A bearer token, or a function returning a fresh one for each request. */
export type TokenSource = string | (() => string | Promise<string>);

export interface MemoryClientOptions {
  /** "iam" signs every request with SigV4 (service execute-api); "jwt" sends `Authorization: Bearer`;
   * "none" neither. Left out: a token means JWT, an execute-api host IAM, anything else none. */
  auth?: Auth;
  token?: TokenSource;
  /** IAM only: the region (default: from the execute-api host, else AWS_REGION / AWS_DEFAULT_REGION). */
  region?: string;
  /** IAM only: credentials or a provider of them (default: the AWS SDK's default credential chain,
   * from the optional peer @aws-sdk/credential-provider-node). */
  credentials?: AwsCredentials | CredentialsProvider;
  /** Per attempt (default 10 s). */
  timeoutMs?: number;
  /** Retries after the first attempt on what may have failed before the server acted (default 2). */
  retries?: number;
  /** Another fetch (a proxy agent, a test double); default the global one. */
  fetch?: typeof fetch;
}

const EXECUTE_API_HOST = /^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$/;

type QueryValue = string | number | boolean | null | undefined;
type QueryParams = Record<string, QueryValue>;

interface Call<T> {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  query?: QueryParams;
  body?: unknown;
  /** The result of a 404 not_found (undefined: raise NotFound). */
  missing?: T;
  empty?: T;
}

/** One page of memories, newest first; `next_cursor` fetches the next (null: the last). */
export interface MemoryList extends MemoryPage, Iterable<MemoryRecord> {}

function inferAuth(apiUrl: URL, auth: Auth | undefined, token: TokenSource | undefined): Auth {
  if (auth !== undefined) return auth;
  if (token !== undefined) return "jwt";
  return EXECUTE_API_HOST.test(apiUrl.hostname.toLowerCase()) ? "iam" : "none";
}

/** RFC 3986 encoding, as SigV4 canonicalises: the URL that is signed is the URL that is sent. */
export function encodeRfc3986(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function checkText(value: string, field: string): string {
  if (!value.isWellFormed()) throw new InvalidInput(`${field} contains a lone surrogate, which is not text`, field);
  return value;
}

function idPath(id: string, field = "memory_id"): string {
  if (typeof id !== "string" || !id) throw new InvalidInput(`${field} must be a non-empty string`, field);
  return encodeRfc3986(checkText(id, field));
}

function bool(value: boolean | null | undefined): string | undefined {
  return value ? "true" : undefined;
}

function filterParams(filters: MemoryFilters | null | undefined): QueryParams {
  if (!filters) return {};
  return {
    categories: filters.categories?.length ? filters.categories.join(",") : undefined,
    metadata: filters.metadata != null ? JSON.stringify(filters.metadata) : undefined,
    created_after: filters.created_after ?? undefined,
    created_before: filters.created_before ?? undefined,
  };
}

/** An environment variable where there is a process (Node), else nothing (a browser, an edge runtime). */
function environment(name: string): string | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name] || undefined;
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

/** The rushmem HTTP API (RecallFunction behind API Gateway, or `rushmem serve`). Every
 * operation is idempotent, so unreachable, timed out, 429 and 502-504 are retried `retries` times,
 * after the answer's Retry-After or a jittered backoff. Errors are the service's kinds (errors.ts). */
export class MemoryClient {
  readonly apiUrl: string;
  readonly auth: Auth;
  private readonly token: TokenSource | undefined;
  private readonly retries: number;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;
  private readonly signer: SigV4Signer | undefined;

  constructor(apiUrl: string, options: MemoryClientOptions = {}) {
    let url: URL;
    try {
      url = new URL(apiUrl);
    } catch {
      throw new ConfigurationError(`apiUrl must be an http(s) URL, not ${JSON.stringify(apiUrl)}`);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      throw new ConfigurationError(`apiUrl must be an http(s) URL, not ${JSON.stringify(apiUrl)}`);
    }
    this.apiUrl = apiUrl.replace(/\/+$/, "");
    this.auth = inferAuth(url, options.auth, options.token);
    if (!["iam", "jwt", "none"].includes(this.auth)) {
      throw new ConfigurationError(`auth must be 'iam', 'jwt' or 'none', not ${JSON.stringify(this.auth)}`);
    }
    if (this.auth === "jwt" && options.token === undefined) {
      throw new ConfigurationError("auth 'jwt' needs token (a string or a function returning one)");
    }
    this.token = options.token;
    this.retries = Math.max(0, options.retries ?? CLIENT_RETRIES);
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.fetch = options.fetch ?? globalThis.fetch;
    if (this.auth === "iam") {
      const region =
        options.region ?? EXECUTE_API_HOST.exec(url.hostname.toLowerCase())?.[1] ?? environment("AWS_REGION") ?? environment("AWS_DEFAULT_REGION");
      if (!region) throw new ConfigurationError("auth 'iam' needs region (not in the API URL nor AWS_REGION)");
      this.signer = new SigV4Signer(region, options.credentials);
    }
  }

  // ---- the API ---------------------------------------------------------------------------

  /** The memories relevant to `query` (or to the latest user message of `messages`) and the
   * [RUSH_MEMORY] block for the system prompt. */
  async recall(request: RecallRequest): Promise<RecallResult> {
    return this.run({ method: "POST", path: "/recall", body: request });
  }

  /** Store facts now (no LLM): ids in input order, and per fact what happened. A string is a fact. */
  async add(memories: ReadonlyArray<string | NewMemory>, options: AddOptions = {}): Promise<StoredIds> {
    const items = memories.map((m) => (typeof m === "string" ? { content: m } : m));
    return this.run({ method: "POST", path: "/memories", body: { ...options, memories: items } });
  }

  /** Hand a finished conversation to the write path now (POST /conversations): the server extracts
   * and stores what is worth keeping. The same conversation twice is a `duplicate`. */
  async addMessages(messages: readonly ChatMessage[], options: ConversationOptions = {}): Promise<IngestOutcome> {
    // The same checks as the queue's message (the user may come from a token here).
    checkConversation({ ...options, messages: [...messages] }, { userRequired: false });
    return this.run({ method: "POST", path: "/conversations", body: { ...options, messages } });
  }

  /** One page of the user's memories, newest first (iterate it); `next_cursor` fetches the next. */
  async listMemories(query: ListQuery = {}): Promise<MemoryList> {
    const { filters, include_inactive, ...rest } = query;
    const page = await this.run<MemoryPage>({
      method: "GET",
      path: "/memories",
      query: { ...rest, include_inactive: bool(include_inactive), ...filterParams(filters) },
    });
    return { ...page, [Symbol.iterator]: () => page.memories[Symbol.iterator]() };
  }

  /** Every memory of the user (matching `filters`), page after page. */
  async *iterMemories(query: Omit<ListQuery, "cursor"> = {}): AsyncGenerator<MemoryRecord> {
    let cursor: string | null | undefined;
    do {
      const page = await this.listMemories({ limit: 500, ...query, cursor });
      yield* page.memories;
      cursor = page.next_cursor;
    } while (cursor);
  }

  /** One memory of the user (live or not); NotFound when the user has none with that id. */
  async getMemory(memoryId: string, query: GetQuery = {}): Promise<MemoryRecord> {
    return this.run({ method: "GET", path: `/memories/${idPath(memoryId)}`, query });
  }

  /** Change a memory (a field left out stays; null clears `expires_at` or `metadata`); it as it now is.
   * Conflict (field `content`) when another memory of the scope already states the new content. */
  async updateMemory(memoryId: string, changes: MemoryChanges, query: UserQuery = {}): Promise<MemoryRecord> {
    return this.run({ method: "PATCH", path: `/memories/${idPath(memoryId)}`, query, body: changes });
  }

  /** Delete one memory (its text leaves the history too); false when the user has none with that id. */
  async forgetMemory(memoryId: string, query: UserQuery = {}): Promise<boolean> {
    return this.run({ method: "DELETE", path: `/memories/${idPath(memoryId)}`, query, missing: false, empty: true });
  }

  /** Delete everything stored about the user; the erasure receipt. */
  async forgetUser(userId: string): Promise<ErasureReceipt> {
    return this.run({ method: "DELETE", path: "/memories", query: { user_id: userId } });
  }

  /** A stored erasure receipt (NotFound if none; with a token, only the caller's own). */
  async erasure(erasureId: string): Promise<ErasureReceipt> {
    return this.run({ method: "GET", path: `/erasures/${idPath(erasureId, "erasure_id")}` });
  }

  /** The user's usage per UTC day from `from` to `to` (YYYY-MM-DD, both included; default the last 30 days). */
  async usage(query: UsageQuery = {}): Promise<UsageReport> {
    return this.run({ method: "GET", path: "/usage", query });
  }

  /** The extraction instructions a project's conversations are extracted with (version 0: none stored). */
  async instructions(query: InstructionsQuery = {}): Promise<StoredInstructions> {
    return this.run({ method: "GET", path: "/instructions", query });
  }

  /** Replace a project's extraction instructions (a new version); InvalidInput names a bad field. */
  async setInstructions(request: InstructionsRequest): Promise<StoredInstructions> {
    return this.run({ method: "PUT", path: "/instructions", body: request });
  }

  /** Every stored version of a project's extraction instructions, oldest first. */
  async instructionsHistory(query: InstructionsHistoryQuery = {}): Promise<StoredInstructions[]> {
    const answer = await this.run<{ versions: StoredInstructions[] }>({ method: "GET", path: "/instructions/history", query });
    return answer.versions;
  }

  /** Every recorded change of one of the user's memories, oldest first, page after page (NotFound if none). */
  async history(memoryId: string, query: Omit<HistoryQuery, "cursor"> = {}): Promise<MemoryEvent[]> {
    const events: MemoryEvent[] = [];
    let cursor: string | undefined;
    do {
      const answer = await this.run<{ events: MemoryEvent[]; next_cursor?: string | null }>({
        method: "GET",
        path: `/memories/${idPath(memoryId)}/history`,
        query: { ...query, cursor },
      });
      events.push(...answer.events);
      cursor = answer.next_cursor ?? undefined;
    } while (cursor);
    return events;
  }

  /** The user's writes held for review (AGENT_MEMORY_REVIEW_WRITES), oldest first: never recalled until approved. */
  async pending(query: PendingQuery = {}): Promise<PendingMemory[]> {
    const answer = await this.run<{ memories: PendingMemory[] }>({ method: "GET", path: "/memories/pending", query });
    return answer.memories;
  }

  /** Every user with their counts of memories: for an IAM caller or the local server (a JWT caller gets Forbidden). */
  async users(query: UsersQuery = {}): Promise<UserCount[]> {
    const answer = await this.run<{ users: UserCount[] }>({ method: "GET", path: "/users", query });
    return answer.users;
  }

  /** Approve (written as any write, recalled from now on) or reject a write held for review. */
  async review(pendingId: string, decision: ReviewDecision, query: UserQuery = {}): Promise<ReviewOutcome> {
    const body = { decision, ...(query.user_id ? { user_id: query.user_id } : {}) };
    return this.run({ method: "POST", path: `/memories/${idPath(pendingId)}/review`, body });
  }

  /** Everything the user has, as import lines (`rushmem import` restores them), page after page. */
  async *exportMemories(query: ExportQuery = {}): AsyncGenerator<ImportLine> {
    const { page_size, history, ...rest } = query;
    let cursor: string | null | undefined;
    do {
      const page: ExportPage = await this.run({
        method: "GET",
        path: "/memories/export",
        query: { ...rest, history: bool(history), limit: page_size, cursor },
      });
      yield* page.lines;
      cursor = page.next_cursor;
    } while (cursor);
  }

  // ---- transport -------------------------------------------------------------------------

  private url(call: Call<unknown>): string {
    const pairs = Object.entries(call.query ?? {})
      .filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined && entry[1] !== null)
      .map(([key, value]) => [key, checkText(String(value), key)] as const)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const search = pairs.map(([k, v]) => `${encodeRfc3986(k)}=${encodeRfc3986(v)}`).join("&");
    return this.apiUrl + call.path + (search ? `?${search}` : "");
  }

  private async headers(method: string, url: string, body: string | undefined): Promise<Record<string, string>> {
    const headers: Record<string, string> = { accept: "application/json" };
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.auth === "jwt" && this.token !== undefined) {
      const token = typeof this.token === "function" ? await this.token() : this.token;
      headers.authorization = `Bearer ${token}`;
    } else if (this.signer !== undefined) {
      Object.assign(headers, await this.signer.sign(method, url, headers, body ?? ""));
    }
    return headers;
  }

  private async run<T>(call: Call<T>): Promise<T> {
    const url = this.url(call);
    let body: string | undefined;
    if (call.body !== undefined) {
      body = JSON.stringify(call.body);
      if (!body.isWellFormed()) throw new InvalidInput("the request contains a lone surrogate, which is not text");
    }
    for (let attempt = 1; ; attempt++) {
      let wait: number | undefined;
      let failure: AgentMemoryError;
      try {
        const response = await this.fetch(url, {
          method: call.method,
          headers: await this.headers(call.method, url, body),
          body,
          signal: AbortSignal.timeout(this.timeoutMs),
        });
        if (response.ok) {
          if (response.status === 204 || call.empty !== undefined) {
            await response.body?.cancel();
            return call.empty as T;
          }
          const text = await response.text();
          try {
            return JSON.parse(text) as T;
          } catch (cause) {
            throw new AgentMemoryError(`${call.method} ${call.path}: not the JSON answer this client expects`, { cause });
          }
        }
        const text = await response.text();
        let answer: unknown;
        try {
          answer = text ? JSON.parse(text) : undefined;
        } catch {
          answer = { message: text.slice(0, 200) };
        }
        failure = errorFromAnswer(response.status, answer, response.headers.get("apigw-requestid") ?? undefined);
        if (failure instanceof NotFound && call.missing !== undefined) return call.missing;
        if (!isRetryableStatus(response.status)) throw failure;
        wait = parseRetryAfter(response.headers.get("retry-after"), CLIENT_MAX_DELAY_S);
      } catch (error) {
        if (error instanceof AgentMemoryError) throw error;
        // fetch rejects with a TypeError when the server cannot be reached, a TimeoutError when the
        // attempt ran out of time: nothing was answered, so another try may succeed.
        failure = new ServiceUnavailable(`cannot reach the memory API at ${this.apiUrl}: ${String(error)}`, { cause: error });
      }
      if (attempt > this.retries) throw failure;
      await sleep(wait ?? backoff(attempt, CLIENT_BASE_DELAY_S, CLIENT_MAX_DELAY_S));
    }
  }
}
