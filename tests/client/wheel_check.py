"""`make wheel-check`: the server's wheel, installed in a fresh venv outside the checkout, runs
`agent-memory serve`, `invoke` and `demo` from any directory (the stack's files are package data).

Usage: python tests/client/wheel_check.py VENV. Runs every command from an empty temporary directory
with the venv's own `agent-memory`, on a fresh embedded database and the hash embedder (the wheel is
installed without the local model); prints one line per check and exits non-zero on the first failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _call(url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)


def main(venv: str) -> int:
    command = str(Path(venv) / "bin" / "agent-memory")
    with tempfile.TemporaryDirectory(prefix="agent-memory-wheel-check-") as work:
        assert not Path(work).resolve().is_relative_to(ROOT), "the check must run outside the checkout"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("AGENT_MEMORY_", "VIRTUAL_ENV"))},
            "AGENT_MEMORY_DATA_DIR": str(Path(work) / "pgdata"),
            "AGENT_MEMORY_EMBEDDING_PROVIDER": "hash",
            "PYTHONUNBUFFERED": "1",
            "PATH": f"{Path(venv) / 'bin'}:{os.environ.get('PATH', '')}",
        }

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([command, *args], cwd=work, env=env, capture_output=True, text=True, timeout=300)

        version = run("--version")
        assert version.returncode == 0 and version.stdout.startswith("agent-memory "), version
        print(f"wheel-check: {version.stdout.strip()}")

        invoked = run("invoke", "IngestFunction", "events/conversation-ended.json")
        assert invoked.returncode == 0, invoked.stderr
        assert json.loads(invoked.stdout) == {"batchItemFailures": []}, invoked.stdout
        print("wheel-check: invoke IngestFunction with the packaged events/conversation-ended.json")

        demo = run("demo")
        assert demo.returncode == 0 and "[/RUSH_MEMORY]" in demo.stdout, demo.stdout + demo.stderr
        print("wheel-check: demo")

        log = Path(work) / "serve.log"
        with log.open("w") as stderr:
            serve = subprocess.Popen(
                [command, "serve", "--port", "0", "--no-warm"], cwd=work, env=env, stdout=subprocess.PIPE,
                stderr=stderr, text=True,
            )  # fmt: skip
        try:
            assert serve.stdout is not None
            url = json.loads(serve.stdout.readline())["url"]
            stored = _call(url, "POST", "/memories", {"user_id": "wheel", "memories": [{"content": "Prefers pnpm"}]})
            assert len(stored["ids"]) == 1, stored
            recalled = _call(url, "POST", "/recall", {"user_id": "wheel", "query": "pnpm"})
            assert recalled["memories"][0]["content"] == "Prefers pnpm", recalled
            with urllib.request.urlopen(url + "/docs", timeout=60) as page:
                assert b"swagger" in page.read().lower()
            # The memory page's files are package data of the wheel.
            with urllib.request.urlopen(url + "/", timeout=60) as page:
                assert b'src="page/page.js"' in page.read()
            with urllib.request.urlopen(url + "/page/page.js", timeout=60) as page:
                assert b"textContent" in page.read()
            print(f"wheel-check: serve on {url}: remember, recall, /docs, the memory page at /")
        except Exception:
            sys.stderr.write(log.read_text())
            raise
        finally:
            serve.terminate()
            serve.wait(timeout=60)
    print("wheel-check: 4 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
