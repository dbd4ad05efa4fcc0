"""A fresh RecallFunction container's first recall, served from a real database, loads the read
path only: the write path's steps (extraction, the ingest pipeline, the write verbs) wait for the
first write (or SnapStart's warm-up). Without SnapStart (samconfig.toml's quickstart and dev) every
cold start pays for what the first request imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.unit.test_imports import WRITE_PATH

REPO = Path(__file__).resolve().parents[2]
FIRST_RECALL = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with open(sys.argv[2]) as f:
    event = json.load(f)

class Context:
    function_name = "first-request"
    function_version = "1"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:first-request"
    aws_request_id = "c6af9ac6-7b61-11e6-9a41-93e8deadbeef"
    def get_remaining_time_in_millis(self):
        return 30000

result = module.lambda_handler(event, Context())
print(json.dumps({"status": result["statusCode"], "modules": sorted(sys.modules)}))
"""


def test_a_containers_first_recall_does_not_import_the_write_path(database_url: str) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RUSHMEM_", "AGENT_MEMORY_", "POWERTOOLS_"))}
    env = {
        **clean,
        "RUSHMEM_DATABASE_URL": database_url,
        "RUSHMEM_EMBEDDING_PROVIDER": "hash",
        "RUSHMEM_DB_ROLE": "agent_memory_app",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "AWS_REGION": "us-east-1",
    }
    handler = REPO / "functions" / "recall" / "app.py"
    event = REPO / "events" / "http-recall-iam.json"
    done = subprocess.run(
        [sys.executable, "-c", FIRST_RECALL, str(handler), str(event)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["status"] == 200, done.stderr[-3000:]
    loaded = answer["modules"]
    assert "rushmem.service.recalling" in loaded  # the recall did run
    assert not [m for m in loaded if m.startswith(WRITE_PATH)]


def test_snapstarts_warm_up_imports_every_operations_path() -> None:
    """With SnapStart the snapshot holds every path, so a restored container's first write imports
    nothing (the dispatcher defers them only for cold starts without a snapshot)."""
    code = (
        "import json, sys\nfrom rushmem import lifecycle\nlifecycle.warm_up()\nprint(json.dumps(sorted(sys.modules)))\n"
    )
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("RUSHMEM_", "AGENT_MEMORY_", "POWERTOOLS_"))}
    env = {
        **clean,
        "RUSHMEM_DATABASE_URL": "postgresql://nobody@unreachable.invalid/x",  # the warm-up connects to nothing
        "RUSHMEM_EMBEDDING_PROVIDER": "hash",
    }
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert {"rushmem.service.writing", "rushmem.service.editing", "rushmem.ingest.conversation"} <= loaded
