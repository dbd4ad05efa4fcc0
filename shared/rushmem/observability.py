"""One Logger, Tracer and Metrics for both functions, created once and imported by handlers.

Creating them does no I/O: Powertools reads the optional POWERTOOLS_* variables and sets
up a log handler. The Tracer is Powertools' only where X-Ray tracing can be on (in Lambda,
POWERTOOLS_TRACE_DISABLED not true: the template's Tracing parameter sets it); elsewhere a
stand-in whose decorators return the function as it is. Powertools' Tracer imports the X-Ray
SDK (and botocore with it) even when disabled: ~150 ms of a cold start for nothing.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, TypeVar, cast, overload

from aws_lambda_powertools import Logger, Metrics

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

# Not "rushmem": Powertools names its logger after the service, and a logger named rushmem would be
# the package's own, taking every rushmem.* module's records onto its JSON handler on stdout.
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "agent-memory")
_TRUE = {"1", "true", "yes", "on", "y", "t"}

F = TypeVar("F", bound=Callable[..., Any])


class _CurrentStdout(io.TextIOBase):
    """Writes to sys.stdout as it is at write time, not at import: ``rushmem invoke`` and
    ``serve`` redirect stdout to stderr around the handler, whatever imported this module first."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


def tracing_enabled(environ: os._Environ[str] | dict[str, str] = os.environ) -> bool:
    """Powertools' own rule: only in Lambda (not SAM local or Chalice), unless POWERTOOLS_TRACE_DISABLED."""
    if environ.get("POWERTOOLS_TRACE_DISABLED", "false").strip().lower() in _TRUE:
        return False
    return (
        bool(environ.get("LAMBDA_TASK_ROOT"))
        and not environ.get("AWS_SAM_LOCAL")
        and not environ.get("AWS_CHALICE_CLI_MODE")
    )


class NoTracer:
    """The Tracer's decorators as no-ops, for when tracing is off (same call forms)."""

    @overload
    def capture_lambda_handler(self, lambda_handler: F) -> F: ...

    @overload
    def capture_lambda_handler(
        self, lambda_handler: None = None, capture_response: bool | None = None, capture_error: bool | None = None
    ) -> Callable[[F], F]: ...

    def capture_lambda_handler(
        self, lambda_handler: F | None = None, capture_response: bool | None = None, capture_error: bool | None = None
    ) -> F | Callable[[F], F]:
        return lambda_handler if lambda_handler is not None else _unchanged

    capture_method = capture_lambda_handler


def _unchanged(function: F) -> F:
    return function


def make_tracer() -> Tracer | NoTracer:
    if not tracing_enabled():
        return NoTracer()
    from aws_lambda_powertools import Tracer

    return Tracer(service=SERVICE)


logger = Logger(service=SERVICE, stream=cast("IO[str]", _CurrentStdout()))
# Typed as NoTracer's interface, which is the part of Powertools' Tracer the handlers use.
tracer = cast(NoTracer, make_tracer())
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "Rushmem"), service=SERVICE)
