"""The one retry policy (:mod:`rushmem_contract.retry`) run for every remote provider call
(OpenAI-compatible HTTP, Bedrock, Comprehend), within a time budget.

An attempt that fails in a way worth another try raises :class:`Retryable`; anything else
propagates at once. Retries stop after ``max_retries``, and none starts if its wait would end past
the budget (``retry_budget_s``): a caller inside a Lambda function always gets its answer in time.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type

from rushmem.config import Settings
from rushmem_contract.errors import ProviderError
from rushmem_contract.retry import MAX_DELAY_S, Retryable, parse_retry_after, wait_for

# Defined once, in the contract (the client runs the same policy); named here for the providers.
__all__ = ["MAX_DELAY_S", "RetryPolicy", "Retryable", "parse_retry_after"]

T = TypeVar("T")


def _setting(name: str) -> Any:
    """A setting's default: a policy built without settings behaves as the defaults say."""
    return Settings.model_fields[name].default


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a provider call is retried (see the module docstring).

    ``sleep``, ``clock`` and ``jitter`` are injectable so tests can observe the waits.
    """

    max_retries: int = _setting("max_retries")
    base_delay_s: float = _setting("retry_base_delay_s")
    budget_s: float = _setting("retry_budget_s")
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)
    clock: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)
    jitter: Callable[[float, float], float] = field(default=random.uniform, compare=False, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(
            max_retries=settings.max_retries,
            base_delay_s=settings.retry_base_delay_s,
            budget_s=settings.retry_budget_s,
        )

    def deadline(self) -> float:
        """When, on ``clock``, a budget starting now ends: calls that run together can share it."""
        return self.clock() + self.budget_s

    def call(self, provider: str, attempt: Callable[[], T], *, deadline: float | None = None) -> T:
        """``attempt()``, retried while it raises :class:`Retryable` and the bounds allow.

        Giving up raises :class:`ProviderError` naming ``provider``, with the last failure.
        ``deadline``: the end of the budget (default: ``budget_s`` from now).
        """
        end = self.deadline() if deadline is None else deadline

        def stop(state: RetryCallState) -> bool:
            # The wait is computed before this check, so a retry that would start late never waits.
            return state.attempt_number > self.max_retries or self.clock() + state.upcoming_sleep > end

        retrying = Retrying(
            stop=stop,
            wait=self._wait,
            retry=retry_if_exception_type(Retryable),
            sleep=self.sleep,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except Retryable as exc:
            attempts = retrying.statistics["attempt_number"]
            tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
            raise ProviderError(provider, f"{exc} (gave up after {tries})") from exc

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        return wait_for(exc, state.attempt_number, self.base_delay_s, jitter=self.jitter)
