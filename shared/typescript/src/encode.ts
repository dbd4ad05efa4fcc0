// A request as it travels (the contract's Operation.http): path fields in the path; for GET and
// DELETE every other field in the query string, for POST, PUT and PATCH in the JSON body but the
// operation's query fields. In the query string a scalar is its text (booleans true/false, dates
// ISO 8601), a list comma-separated, an object JSON, and a nested model's fields flattened in its
// place (GET /memories' filters). Driven by the generated table (src/operations.ts).
//
// The server decides what is valid. Refused here is only what the URL cannot carry for it to
// refuse, in the words the contract's validation uses (so every door says the same): a missing or
// dot-segment path field (it would reach another route), and in the query string an unknown field, a
// nested model that is no object or a list that is no list (the server would never see them as given).
import { ERROR_KINDS, InvalidInput } from "./errors.js";

/** How a query field travels: text, a list (comma-separated), an object (JSON), or a nested model's
 * fields in its place. */
export type QueryEncoding = "text" | "list" | "object" | { readonly model: string; readonly fields: Readonly<Record<string, QueryEncoding>> };

/** One operation, as src/operations.ts describes it. */
export interface OperationSpec {
  readonly operationId: string;
  readonly method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  /** The path template, e.g. /memories/{memory_id}. */
  readonly route: string;
  /** The success status (204: no content). */
  readonly status: number;
  /** The request model's name. */
  readonly request: string;
  /** The path fields, each with its schema's format ("uuid"; "" when none). */
  readonly path: Readonly<Record<string, string>>;
  /** The query fields and how each is encoded. */
  readonly query: Readonly<Record<string, QueryEncoding>>;
  /** The body's fields (null: no body; any other field of the request goes there too, for the server to judge). */
  readonly body: readonly string[] | null;
}

export interface HttpRequest {
  method: OperationSpec["method"];
  /** Encoded, without the query string. */
  path: string;
  query: Array<[string, string]>;
  /** The JSON body (undefined: none). */
  body: Record<string, unknown> | undefined;
}

/** RFC 3986 encoding, as SigV4 canonicalises: the URL that is signed is the URL that is sent. */
export function encodeRfc3986(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** A refusal before sending: the code the server answers for it (no status: nothing was sent). */
function refused(message: string, field?: string): InvalidInput {
  const error = new InvalidInput(message, field);
  error.code = ERROR_KINDS.find((kind) => kind.error === InvalidInput)?.code;
  return error;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

function wellFormed(value: string, field: string): string {
  if (!value.isWellFormed()) throw refused(`${field} contains a lone surrogate, which is not text`, field);
  return value;
}

function text(value: unknown): string {
  if (typeof value === "boolean") return value ? "true" : "false";
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "object" && value !== null) return JSON.stringify(value);
  return String(value);
}

function pathSegment(name: string, format: string, value: unknown): string {
  if (value === undefined || value === null) throw refused(`${name}: Field required`, name);
  const segment = wellFormed(text(value), name);
  // "", "." and ".." would change the URL's path itself (another route): refused as the model would.
  if (segment === "" || segment === "." || segment === "..") {
    const why = format === "uuid" ? (segment ? "invalid character: found `.` at 0" : "invalid length: found 0") : undefined;
    throw refused(why ? `${name}: Input should be a valid UUID, ${why}` : `${name}: cannot be ${JSON.stringify(segment)} in a URL path`, name);
  }
  return encodeRfc3986(segment);
}

function queryValues(fields: Readonly<Record<string, QueryEncoding>>, values: Record<string, unknown>, within: string, out: Array<[string, string]>): void {
  for (const [name, encoding] of Object.entries(fields)) {
    const value = values[name];
    if (value === undefined || value === null) continue;
    const field = within + name;
    if (typeof encoding === "object") {
      if (!isObject(value)) throw refused(`${field}: Input should be a valid dictionary or instance of ${encoding.model}`, field);
      refuseUnknown(value, encoding.fields, `${field}.`);
      queryValues(encoding.fields, value, `${field}.`, out);
      continue;
    }
    let sent: string;
    if (encoding === "list") {
      if (!Array.isArray(value)) throw refused(`${field}: Input should be a valid list`, field);
      sent = value.map(text).join(",");
    } else {
      sent = encoding === "object" ? JSON.stringify(value) : text(value);
    }
    out.push([name, wellFormed(sent, field)]);
  }
}

function refuseUnknown(values: Record<string, unknown>, known: Readonly<Record<string, unknown>>, within = ""): void {
  for (const [name, value] of Object.entries(values)) {
    if (!(name in known) && value !== undefined) {
      throw refused(`${within}${name}: Extra inputs are not permitted`, `${within}${name}`);
    }
  }
}

/** The request of `spec`'s operation as it travels. */
export function encodeRequest(spec: OperationSpec, request: unknown): HttpRequest {
  const values = request ?? {};
  if (!isObject(values)) throw refused(`Input should be a valid dictionary or instance of ${spec.request}`);
  let path = spec.route;
  for (const [name, format] of Object.entries(spec.path)) {
    path = path.replace(`{${name}}`, pathSegment(name, format, values[name]));
  }
  if (spec.body === null) {
    // Without a body, an unknown field would be a query parameter the server ignores.
    refuseUnknown(values, { ...spec.path, ...spec.query });
  }
  const query: Array<[string, string]> = [];
  queryValues(spec.query, values, "", query);
  let body: Record<string, unknown> | undefined;
  if (spec.body !== null) {
    body = {};
    for (const [name, value] of Object.entries(values)) {
      if (!(name in spec.path) && !(name in spec.query) && value !== undefined) body[name] = value;
    }
  }
  return { method: spec.method, path, query, body };
}
