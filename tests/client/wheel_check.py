"""`make wheel-check`: the server's wheel, installed in a fresh venv outside the checkout, runs
`rushmem serve`, `invoke` and `demo` from any directory (the stack's files are package data),
and, once the `local` extra is added, the README's four lines of Python with no server.

Usage: python tests/client/wheel_check.py VENV (the `serve` extra: every command from an empty
temporary directory with the venv's own `rushmem`, on a fresh embedded database and the hash
embedder), or python tests/client/wheel_check.py --four-lines VENV (the `local` extra: nothing set but
the data directory, so the default local model embeds). Prints one line per check and exits non-zero
on the first failure."""

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


def _clean_env(work: str, venv: str) -> dict[str, str]:
    return {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("RUSHMEM_", "AGENT_MEMORY_", "VIRTUAL_ENV", "PYTHON"))
        },
        "RUSHMEM_DATA_DIR": str(Path(work) / "pgdata"),
        "PYTHONUNBUFFERED": "1",
        "PATH": f"{Path(venv) / 'bin'}:{os.environ.get('PATH', '')}",
    }


# What the README shows, plus a second memory so that the recall has to choose, and where the
# package came from (the venv, not this checkout).
FOUR_LINES = """
from rushmem import Memory
m = Memory()
m.add("The user prefers TypeScript", user_id="u-42")
m.add("The user's cat is called Miso", user_id="u-42")
found = m.recall("Which programming language should I use?", user_id="u-42", limit=1)
import rushmem, json
print(json.dumps({"provider": m.settings.embedding_provider, "package": rushmem.__file__,
                  "memories": [r.content for r in found.memories], "block": found.prompt_block}))
m.close()
"""


def four_lines(venv: str) -> int:
    """`from rushmem import Memory; m = Memory(); m.add(...); m.recall(...)` in a new process of
    the venv's Python, from an empty directory, on the embedded default and the local model."""
    with tempfile.TemporaryDirectory(prefix="rushmem-four-lines-") as work:
        python = str(Path(venv) / "bin" / "python")
        done = subprocess.run(
            [python, "-c", FOUR_LINES], cwd=work, env=_clean_env(work, venv), capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert not Path(out["package"]).resolve().is_relative_to(ROOT), out["package"]
        assert out["provider"] == "local", out
        assert out["memories"] == ["The user prefers TypeScript"], out
        assert "The user prefers TypeScript" in out["block"], out
        assert (Path(work) / "pgdata" / "PG_VERSION").exists(), "no embedded server data directory"
    print("wheel-check: the four lines (Memory().add, .recall) with the local extra, no server: 1 passed")
    return 0


def main(venv: str) -> int:
    command = str(Path(venv) / "bin" / "rushmem")
    with tempfile.TemporaryDirectory(prefix="rushmem-wheel-check-") as work:
        assert not Path(work).resolve().is_relative_to(ROOT), "the check must run outside the checkout"
        env = {**_clean_env(work, venv), "RUSHMEM_EMBEDDING_PROVIDER": "hash"}

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([command, *args], cwd=work, env=env, capture_output=True, text=True, timeout=300)

        version = run("--version")
        assert version.returncode == 0 and version.stdout.startswith("rushmem "), version
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
    sys.exit(four_lines(sys.argv[2]) if sys.argv[1] == "--four-lines" else main(sys.argv[1]))
