// The one retry policy of rushmem (rushmem_contract.retry), the client's side: every
// operation is idempotent, so what may have failed before the server acted (unreachable, timed out,
// 429, 502, 503, 504) is retried, after the answer's Retry-After or a jittered exponential backoff.

/** The answers worth another try: throttled, or a gateway/upstream that failed or timed out. */
export const RETRY_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);
/** The client's defaults: its calls are short and interactive, so its waits are too. */
export const CLIENT_RETRIES = 2;
export const CLIENT_BASE_DELAY_S = 0.2;
export const CLIENT_MAX_DELAY_S = 2.0;

export function isRetryableStatus(status: number): boolean {
  return RETRY_STATUSES.has(status);
}

/** Seconds to wait from a Retry-After value (seconds or an HTTP date), in [0, maxDelayS];
 * undefined when absent or unreadable (the backoff applies then). */
export function parseRetryAfter(value: string | null | undefined, maxDelayS = CLIENT_MAX_DELAY_S, now = Date.now()): number | undefined {
  if (value == null || !value.trim()) return undefined;
  let seconds = Number(value.trim());
  if (Number.isNaN(seconds)) {
    const when = Date.parse(value);
    if (Number.isNaN(when)) return undefined;
    seconds = (when - now) / 1000;
  }
  if (!Number.isFinite(seconds)) return undefined;
  return Math.min(Math.max(seconds, 0), maxDelayS);
}

/** "Equal jitter": uniformly between half and all of base x 2^(retry-1), capped. */
export function backoff(retry: number, baseDelayS = CLIENT_BASE_DELAY_S, maxDelayS = CLIENT_MAX_DELAY_S, random = Math.random): number {
  const ceiling = Math.min(baseDelayS * 2 ** (retry - 1), maxDelayS);
  return ceiling / 2 + random() * (ceiling / 2);
}
