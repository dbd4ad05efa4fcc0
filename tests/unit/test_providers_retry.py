"""The one retry policy of the remote providers: waits, bounds and Retry-After values."""

from __future__ import annotations

import email.utils
import random
from collections.abc import Callable

import pytest

from rushmem.config import Settings
from rushmem.providers.retry import MAX_DELAY_S, Retryable, RetryPolicy, parse_retry_after
from rushmem_contract.errors import ProviderError

NOW = 1_800_000_000.0


class FakeTime:
    """A clock that only moves when the policy sleeps; records every wait."""

    def __init__(self) -> None:
        self.now = 0.0
        self.waits: list[float] = []

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.waits.append(seconds)
        self.now += seconds

    def clock(self) -> float:
        return self.now


def policy(clock: FakeTime, **fields: float) -> RetryPolicy:
    values: dict[str, float] = {"max_retries": 6, "base_delay_s": 1.0, "budget_s": 1000.0} | fields
    return RetryPolicy(
        max_retries=int(values["max_retries"]),
        base_delay_s=values["base_delay_s"],
        budget_s=values["budget_s"],
        sleep=clock.sleep,
        clock=clock.clock,
        jitter=random.Random(7).uniform,
    )


def always(exc: Exception) -> Callable[[], None]:
    def attempt() -> None:
        raise exc

    return attempt


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    clock = FakeTime()
    with pytest.raises(ProviderError) as err:
        policy(clock, max_retries=7).call("openai chat", always(Retryable("HTTP 503 from chat/completions")))
    assert len(clock.waits) == 7
    for retry, wait in enumerate(clock.waits, start=1):
        ceiling = min(2.0 ** (retry - 1), MAX_DELAY_S)
        assert ceiling / 2 <= wait <= ceiling
    assert clock.waits != [min(2.0 ** (r - 1), MAX_DELAY_S) for r in range(1, 8)]  # jittered, not the bare sequence
    assert str(err.value) == "openai chat: HTTP 503 from chat/completions (gave up after 8 attempts)"
    assert err.value.provider == "openai chat"


def test_two_callers_failing_together_do_not_retry_in_lockstep() -> None:
    first, second = FakeTime(), FakeTime()
    for clock in (first, second):
        with pytest.raises(ProviderError):
            RetryPolicy(max_retries=5, base_delay_s=1.0, sleep=clock.sleep, clock=clock.clock).call(
                "bedrock embeddings", always(Retryable("ThrottlingException"))
            )
    assert first.waits != second.waits


def test_no_retry_starts_past_the_budget() -> None:
    # Waits of 0.5-1, 1-2, 2-4 s: the third would end past 2.5 s, so it never starts.
    clock = FakeTime()
    with pytest.raises(ProviderError) as err:
        policy(clock, max_retries=10, budget_s=2.5).call("p", always(Retryable("HTTP 500")))
    assert len(clock.waits) == 2 and clock.now <= 2.5
    assert "gave up after 3 attempts" in str(err.value)


def test_retry_after_replaces_the_backoff_and_a_shared_deadline_bounds_it() -> None:
    clock = FakeTime()
    answers = iter([Retryable("429", retry_after=4.0), Retryable("429", retry_after=0.0)])

    def attempt() -> str:
        exc = next(answers, None)
        if exc:
            raise exc
        return "ok"

    assert policy(clock).call("p", attempt) == "ok"
    assert clock.waits == [4.0, 0.0]
    clock = FakeTime()
    with pytest.raises(ProviderError):  # 4 s asked, 3 s left of a deadline set earlier: give up now
        policy(clock).call("p", always(Retryable("429", retry_after=4.0)), deadline=3.0)
    assert clock.waits == []


def test_other_errors_are_not_retried() -> None:
    clock = FakeTime()
    with pytest.raises(ProviderError, match="invalid api key"):
        policy(clock).call("p", always(ProviderError("p", "HTTP 401: invalid api key")))
    with pytest.raises(KeyError):
        policy(clock).call("p", always(KeyError("bug")))
    assert clock.waits == []


def test_the_policy_takes_its_bounds_from_the_settings() -> None:
    tuned = RetryPolicy.from_settings(Settings(max_retries=1, retry_base_delay_s=0.25, retry_budget_s=5))
    assert (tuned.max_retries, tuned.base_delay_s, tuned.budget_s) == (1, 0.25, 5)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("0", 0.0),
        ("7", 7.0),
        (" 1.5 ", 1.5),
        ("-3", 0.0),  # a negative delay means now, never a negative sleep
        ("86400", MAX_DELAY_S),
        (email.utils.formatdate(NOW + 12, usegmt=True), 12.0),
        (email.utils.formatdate(NOW - 3600, usegmt=True), 0.0),  # in the past: now
        (email.utils.formatdate(NOW + 12), 12.0),  # "-0000": UTC without a zone
        (None, None),
        ("", None),
        ("soon", None),  # unreadable: the backoff applies
        ("nan", None),
        ("inf", None),
        ("Sun, 32 Foo 2026 99:00:00 GMT", None),
    ],
)
def test_retry_after_values(value: str | None, seconds: float | None) -> None:
    parsed = parse_retry_after(value, now=NOW)
    assert parsed == (None if seconds is None else pytest.approx(seconds, abs=1e-6))
