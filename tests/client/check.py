"""`make client-check`: start `rushmem serve` (this venv: the server) on a fresh embedded
database, run tests/client/smoke.py with the client-only venv's Python against it, stop the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(client_python: str) -> int:
    with tempfile.TemporaryDirectory(prefix="rushmem-client-check-") as data:
        env = {
            **os.environ,
            # A folder of its own: the embedded server's initdb wants an empty (or new) one.
            "RUSHMEM_DATA_DIR": str(Path(data) / "pgdata"),
            "RUSHMEM_EMBEDDING_PROVIDER": "hash",
            "RUSHMEM_LLM_PROVIDER": "rules",
            "PYTHONUNBUFFERED": "1",
        }
        env.pop("RUSHMEM_DATABASE_URL", None)
        env.pop("AGENT_MEMORY_DATABASE_URL", None)
        log = Path(data) / "serve.log"
        serve = subprocess.Popen(
            [sys.executable, "-m", "rushmem_tools", "serve", "--port", "0", "--no-warm"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=log.open("w"),
            text=True,
        )
        code = 1
        try:
            assert serve.stdout is not None
            url = json.loads(serve.stdout.readline())["url"]
            smoke = ROOT / "tests" / "client" / "smoke.py"
            # Not from the checkout: the client venv must import its installed copy.
            code = subprocess.run([client_python, str(smoke), url], cwd=data, check=False).returncode
            return code
        finally:
            serve.terminate()
            serve.wait(timeout=60)
            if code:  # the server's side of a failure
                sys.stderr.write(log.read_text())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
