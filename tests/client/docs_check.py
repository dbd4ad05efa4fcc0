"""`make docs-check`: the Swagger page of `rushmem serve` (GET /docs) rendered by a real
headless Chromium; the rendered page must list every operation of the API's OpenAPI document.
Prints the operations found and a screenshot's path; exits non-zero when the page is wrong."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("docs-check: chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="agent-memory-docs-check-") as data:
        env = {
            **os.environ,
            "RUSHMEM_DATA_DIR": str(Path(data) / "pgdata"),
            "RUSHMEM_EMBEDDING_PROVIDER": "hash",
        }
        env.pop("RUSHMEM_DATABASE_URL", None)
        env.pop("AGENT_MEMORY_DATABASE_URL", None)
        serve = subprocess.Popen(
            [sys.executable, "-m", "rushmem_tools", "serve", "--port", "0", "--no-warm"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert serve.stdout is not None
            started = json.loads(serve.stdout.readline())
            with urllib.request.urlopen(f"{started['url']}/openapi.json", timeout=30) as answer:
                document = json.load(answer)
            wanted = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
            flags = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000"]
            dom = subprocess.run(
                [browser, *flags, "--dump-dom", started["docs"]],
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stdout
            shot = Path(tempfile.gettempdir()) / "agent-memory-docs.png"
            subprocess.run(
                [browser, *flags, "--window-size=1280,2000", f"--screenshot={shot}", started["docs"]],
                capture_output=True,
                timeout=120,
                check=True,
            )
        finally:
            serve.terminate()
            serve.wait(timeout=60)
    # Swagger UI renders each operation as a block with its method and path.
    found = set(re.findall(r'opblock-summary-method">(\w+)</span>.*?data-path="([^"]+)"', dom, flags=re.DOTALL))
    rendered = {(m.upper(), p) for m, p in found}
    missing = wanted - rendered
    print(json.dumps({"operations": sorted(f"{m} {p}" for m, p in rendered), "screenshot": str(shot)}, indent=2))
    if missing or "rushmem" not in dom:
        print(f"docs-check: the page does not show {sorted(missing)}", file=sys.stderr)
        return 1
    print(f"docs-check: {len(rendered)} operations rendered by {Path(browser).name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
