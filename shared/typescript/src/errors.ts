// The service's typed errors, as the Python client raises them (rushmem_contract.errors), and
// the one table (rushmem_contract.kinds) that turns an error answer back into one of them.
// A test compares ERROR_KINDS with the Python table, so the two cannot drift.

/** Base class: the message is safe to show. `status`, `code` and `requestId` are those of the
 * answer when there was one (the request id finds the service's log lines). */
export class AgentMemoryError extends Error {
  status?: number;
  code?: string;
  requestId?: string;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The request itself is wrong; `field` names the field when there is one. */
export class InvalidInput extends AgentMemoryError {
  readonly field: string | undefined;
  constructor(message: string, field?: string, options?: ErrorOptions) {
    super(message, options);
    this.field = field;
  }
}

/** A query, memory or message exceeds a configured limit. */
export class InputTooLarge extends InvalidInput {}

/** The change would make the memory state what another memory of the same scope already states. */
export class Conflict extends InvalidInput {}

/** No such memory (or receipt) for this user; someone else's looks the same. */
export class NotFound extends AgentMemoryError {}

/** The caller may not act for that user (or the token was refused). */
export class Forbidden extends AgentMemoryError {}

/** The service, or this client, is configured in a way that cannot work. */
export class ConfigurationError extends AgentMemoryError {}

/** PostgreSQL could not be reached; try again shortly. */
export class DatabaseUnavailable extends AgentMemoryError {}

/** A query ran past its statement timeout. */
export class StatementTimeout extends DatabaseUnavailable {}

/** The Aurora cluster is resuming from auto-pause (about 15 s). */
export class DatabaseResuming extends DatabaseUnavailable {}

/** An embedding or LLM provider failed after its retries. */
export class ProviderError extends AgentMemoryError {
  readonly provider: string;
  constructor(provider: string, message: string, options?: ErrorOptions) {
    super(`${provider}: ${message}`, options);
    this.provider = provider;
  }
}

/** The memory API (or SQS) could not be reached, timed out, throttled or failed, after the retries. */
export class ServiceUnavailable extends AgentMemoryError {}

type ErrorClass = abstract new (...args: never[]) => AgentMemoryError;

export interface ErrorKind {
  readonly error: ErrorClass;
  readonly status: number;
  readonly code: string;
}

/** Every error code the API answers with, most specific first (as rushmem_contract.kinds). */
export const ERROR_KINDS: readonly ErrorKind[] = [
  { error: InputTooLarge, status: 413, code: "input_too_large" },
  { error: Conflict, status: 409, code: "conflict" },
  { error: InvalidInput, status: 400, code: "invalid_input" },
  { error: Forbidden, status: 403, code: "forbidden" },
  { error: NotFound, status: 404, code: "not_found" },
  { error: StatementTimeout, status: 503, code: "statement_timeout" },
  { error: DatabaseResuming, status: 503, code: "database_resuming" },
  { error: DatabaseUnavailable, status: 503, code: "database_unavailable" },
  { error: ProviderError, status: 502, code: "provider_error" },
  { error: ConfigurationError, status: 500, code: "configuration_error" },
  { error: ServiceUnavailable, status: 503, code: "service_unavailable" },
  { error: AgentMemoryError, status: 500, code: "internal_error" },
];

function make(kind: ErrorKind, message: string, field: string | undefined): AgentMemoryError {
  const error = kind.error as unknown;
  if (error === ProviderError) return new ProviderError("rushmem API", message);
  if (error === InputTooLarge || error === Conflict || error === InvalidInput) {
    return new (error as typeof InvalidInput)(message, field);
  }
  return new (error as typeof AgentMemoryError)(message);
}

/** The typed error for a non-2xx answer of this API (or of API Gateway in front of it). */
export function errorFromAnswer(status: number, body: unknown, requestId?: string): AgentMemoryError {
  const fields = body !== null && typeof body === "object" && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
  const code = typeof fields.code === "string" ? fields.code : undefined;
  const field = typeof fields.field === "string" ? fields.field : undefined;
  const message = typeof fields.message === "string" && fields.message ? fields.message : `HTTP ${status}`;
  const kind = ERROR_KINDS.find((k) => k.code === code);
  let error: AgentMemoryError;
  if (kind !== undefined) {
    error = make(kind, message, field);
  } else if (code === "route_not_found" || code === "method_not_allowed") {
    error = new ConfigurationError(`${message} (is the API URL right?)`);
  } else if (status === 401 || status === 403) {
    // Answers without our code come from API Gateway itself (or serve's token check).
    error = new Forbidden(`HTTP ${status}: ${message}`);
  } else if (status === 413) {
    error = new InputTooLarge(message);
  } else if (status === 400 || status === 422 || status === 415) {
    error = new InvalidInput(message);
  } else if (status === 404) {
    error = new ConfigurationError(`HTTP 404: ${message} (is the API URL right?)`);
  } else if (status === 429 || status >= 500) {
    error = new ServiceUnavailable(`the memory API answered HTTP ${status}: ${message}`);
  } else {
    error = new AgentMemoryError(`HTTP ${status}: ${message}`);
  }
  error.status = status;
  if (code !== undefined) error.code = code;
  const id = typeof fields.request_id === "string" ? fields.request_id : requestId;
  if (id) error.requestId = id;
  return error;
}
