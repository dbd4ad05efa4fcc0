// The memory API over HTTP: its operations are generated from the API's OpenAPI document
// (src/operations.ts: one method per operation, each taking its request model); this is the
// transport under them, with the Python client's semantics (rushmem_client): the same auth rules,
// error kinds and retry policy.
import { encodeRequest, encodeRfc3986, type HttpRequest } from "./encode.js";
import { AgentMemoryError, ConfigurationError, ServiceUnavailable, errorFromAnswer } from "./errors.js";
import { OPERATIONS, Operations, PAGES, type OperationName, type PageItems, type PagedOperation, type Requests, type Responses } from "./operations.js";
import { CLIENT_BASE_DELAY_S, CLIENT_MAX_DELAY_S, CLIENT_RETRIES, backoff, isRetryableStatus, parseRetryAfter } from "./retry.js";
import { type AwsCredentials, type CredentialsProvider, SigV4Signer } from "./sigv4.js";

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

function inferAuth(apiUrl: URL, auth: Auth | undefined, token: TokenSource | undefined): Auth {
  if (auth !== undefined) return auth;
  if (token !== undefined) return "jwt";
  return EXECUTE_API_HOST.test(apiUrl.hostname.toLowerCase()) ? "iam" : "none";
}

/** An environment variable where there is a process (Node), else nothing (a browser, an edge runtime). */
function environment(name: string): string | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name] || undefined;
}

function sleep(seconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, seconds * 1000));
}

/** The rushmem HTTP API (RecallFunction behind API Gateway, or `rushmem serve`): every operation
 * as a method taking its request model (`client.list({ user_id, filters: { categories: ["fact"] } })`),
 * generated from the API's OpenAPI document (src/operations.ts). Every operation is idempotent, so
 * unreachable, timed out, 429 and 502-504 are retried `retries` times, after the answer's Retry-After
 * or a jittered backoff. Errors are the service's kinds (errors.ts), as the server words them. */
export class MemoryClient extends Operations {
  readonly apiUrl: string;
  readonly auth: Auth;
  private readonly token: TokenSource | undefined;
  private readonly retries: number;
  private readonly timeoutMs: number;
  private readonly fetch: typeof fetch;
  private readonly signer: SigV4Signer | undefined;

  constructor(apiUrl: string, options: MemoryClientOptions = {}) {
    super();
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

  // ---- the API: the generated methods (Operations) send through this ----------------------

  protected async invoke<K extends OperationName>(name: K, request: Requests[K]): Promise<Responses[K]> {
    const spec = OPERATIONS[name];
    return (await this.send(encodeRequest(spec, request), spec.status === 204)) as Responses[K];
  }

  /** Every item of a paged operation's answers, page after page (`for await (const m of
   * client.pages("list", { user_id }))`: every memory), following `next_cursor`. */
  async *pages<K extends PagedOperation>(name: K, request: Omit<Requests[K], "cursor">): AsyncGenerator<PageItems[K]> {
    let cursor: string | null | undefined;
    do {
      const page = (await this.invoke(name, { ...request, cursor } as Requests[K])) as unknown as Record<string, unknown>;
      yield* page[PAGES[name]] as Array<PageItems[K]>;
      cursor = page.next_cursor as string | null | undefined;
    } while (cursor);
  }

  // ---- transport -------------------------------------------------------------------------

  private url(call: HttpRequest): string {
    // Sorted, as SigV4 canonicalises the query string (the URL signed is the URL sent).
    const pairs = [...call.query].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
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

  /** One request, retried as the policy says; its JSON answer (undefined when `empty`: 204). */
  private async send(call: HttpRequest, empty: boolean): Promise<unknown> {
    const url = this.url(call);
    const body = call.body === undefined ? undefined : JSON.stringify(call.body);
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
          if (empty || response.status === 204) {
            await response.body?.cancel();
            return undefined;
          }
          const text = await response.text();
          try {
            return JSON.parse(text) as unknown;
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
