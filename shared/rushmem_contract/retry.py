"""The one retry policy of rushmem: what is worth another try and how long to wait before it.

Every remote call retries on the same answers (429, 502, 503, 504, and failures to reach the other
side), waits what the other side asked for in ``Retry-After`` when it says, and otherwise an
exponential backoff with "equal jitter". The provider calls (:mod:`rushmem.providers.retry`,
with a time budget) and the Python client (:mod:`rushmem_client.calls`) both run this policy;
tenacity is only the engine that loops. Standard library only.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import math
import random
import time
from collections.abc import Callable
from http import HTTPStatus

# The answers worth another try: throttled, or a gateway/upstream that failed or timed out.
RETRY_STATUSES: frozenset[int] = frozenset(
    {
        HTTPStatus.TOO_MANY_REQUESTS,
        HTTPStatus.BAD_GATEWAY,
        HTTPStatus.SERVICE_UNAVAILABLE,
        HTTPStatus.GATEWAY_TIMEOUT,
    }
)
# Third-party providers (OpenAI-compatible APIs, Bedrock) also answer a passing overload or a
# conflict with 408, 409, 425 or any 5xx (Cloudflare's 520s, 529 "overloaded"); only 501 is final.
# This API's own 500 is not passing (an internal or configuration error): the client does not retry it.
PROVIDER_RETRY_STATUSES: frozenset[int] = frozenset({408, 409, 425, *RETRY_STATUSES, *range(500, 600)} - {501})
# The longest single wait, whether from the backoff or from a Retry-After header.
MAX_DELAY_S = 30.0
# What the service's own 503 answers ask for (Retry-After, in seconds).
RETRY_AFTER_S = 1
# The Python client's defaults: its calls are short and interactive, so its waits are too.
CLIENT_RETRIES = 2
CLIENT_BASE_DELAY_S = 0.2
CLIENT_MAX_DELAY_S = 2.0


def is_retryable_status(status: int) -> bool:
    return status in RETRY_STATUSES


class Retryable(Exception):
    """A failed attempt worth another try; ``retry_after``: the wait the other side asked for
    (seconds), None to back off; ``error``: what to raise when the tries run out (None: the caller
    decides)."""

    def __init__(self, message: str, retry_after: float | None = None, error: Exception | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.error = error


def parse_retry_after(value: str | None, *, now: float | None = None, max_delay_s: float = MAX_DELAY_S) -> float | None:
    """Seconds to wait from a Retry-After value (seconds or an HTTP date), in [0, ``max_delay_s``].

    None when absent or unreadable: the backoff applies then. A negative delay or a date in the
    past means "now".
    """
    if value is None or not value.strip():
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:  # "-0000": a date in UTC with no zone information
            when = when.replace(tzinfo=dt.UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), max_delay_s)


def backoff(
    retry: int,
    base_delay_s: float,
    *,
    max_delay_s: float = MAX_DELAY_S,
    jitter: Callable[[float, float], float] = random.uniform,
) -> float:
    """The wait before retry number ``retry`` (1, 2, ...): "equal jitter", uniformly between half
    and all of base x 2^(retry-1) (capped), so concurrent callers spread out yet still back off."""
    ceiling = min(base_delay_s * 2 ** (retry - 1), max_delay_s)
    return jitter(ceiling / 2, ceiling)


def wait_for(
    failure: BaseException | None,
    retry: int,
    base_delay_s: float,
    *,
    max_delay_s: float = MAX_DELAY_S,
    jitter: Callable[[float, float], float] = random.uniform,
) -> float:
    """The wait before retry number ``retry`` after ``failure``: its Retry-After when it has one
    (never past ``max_delay_s``), else the backoff."""
    if isinstance(failure, Retryable) and failure.retry_after is not None:
        return min(failure.retry_after, max_delay_s)
    return backoff(retry, base_delay_s, max_delay_s=max_delay_s, jitter=jitter)
