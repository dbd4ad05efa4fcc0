"""What loading a handler costs: each function's module imports Powertools, the models and the
HTTP surface, not the service (the database driver, numpy, every step of the data path) and not
the X-Ray SDK unless tracing can be on. Fresh interpreters, as in a cold Lambda container."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HANDLERS = sorted((REPO / "functions").glob("*/app.py"))
DEFERRED = (
    "numpy",
    "psycopg",
    "pgvector",
    "agent_memory.service",
    "agent_memory.extraction",
    "agent_memory.store",
    "disarm",  # the confusables table: loaded by the first text that is not ASCII
)
PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(sorted(sys.modules)))
"""


def modules_after_import(handler: Path, **env: str) -> set[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_MEMORY_", "POWERTOOLS_", "LAMBDA_"))}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(handler)],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    "handler", [h for h in HANDLERS if h.parent.name in {"recall", "ingest"}], ids=lambda p: p.parent.name
)
def test_a_handler_module_loads_without_the_data_path_or_the_xray_sdk(handler: Path) -> None:
    loaded = modules_after_import(handler)
    assert "aws_lambda_powertools" in loaded  # the probe did import the handler
    assert not [m for m in DEFERRED if m in loaded]
    assert "aws_xray_sdk" not in loaded


def test_in_lambda_with_tracing_on_the_handler_uses_the_xray_sdk() -> None:
    recall = REPO / "functions" / "recall" / "app.py"
    assert "aws_xray_sdk" in modules_after_import(recall, LAMBDA_TASK_ROOT=str(recall.parent))
    off = modules_after_import(recall, LAMBDA_TASK_ROOT=str(recall.parent), POWERTOOLS_TRACE_DISABLED="true")
    assert "aws_xray_sdk" not in off


def test_the_tracers_decorators_are_transparent_when_tracing_is_off() -> None:
    from agent_memory.observability import NoTracer, tracing_enabled

    tracer = NoTracer()

    def handler(event: dict[str, int], context: object) -> int:
        return event["n"]

    assert tracer.capture_lambda_handler(handler) is handler
    assert tracer.capture_lambda_handler(capture_response=False)(handler) is handler
    assert tracer.capture_method(handler) is handler
    assert not tracing_enabled({})
    assert tracing_enabled({"LAMBDA_TASK_ROOT": "/var/task"})
    assert not tracing_enabled({"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"})
    assert not tracing_enabled({"LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"})
