"""One Logger, Tracer and Metrics for both functions, created once and imported by handlers.

Creating them does no I/O: Powertools reads the optional POWERTOOLS_* variables and sets
up a log handler. The Tracer is a no-op outside Lambda.
"""

from __future__ import annotations

import io
import os
import sys
from typing import IO, cast

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "agent-memory")


class _CurrentStdout(io.TextIOBase):
    """Writes to sys.stdout as it is at write time, not at import: ``agent-memory invoke`` and
    ``serve`` redirect stdout to stderr around the handler, whatever imported this module first."""

    def write(self, text: str) -> int:
        return sys.stdout.write(text)

    def flush(self) -> None:
        sys.stdout.flush()


logger = Logger(service=SERVICE, stream=cast("IO[str]", _CurrentStdout()))
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "AgentMemory"), service=SERVICE)
