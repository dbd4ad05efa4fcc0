"""One Logger, Tracer and Metrics for both functions, created once and imported by handlers.

Creating them does no I/O: Powertools reads the optional POWERTOOLS_* variables and sets
up a log handler. The Tracer is a no-op outside Lambda.
"""

from __future__ import annotations

import os

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME", "agent-memory")

logger = Logger(service=SERVICE)
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE", "AgentMemory"), service=SERVICE)
