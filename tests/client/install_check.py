"""`make install-check`: the documented install lines resolve, against the public package index, to
nothing GPU-sized: no torch, no nvidia-*/cuda-* and no triton.

The lines are read where a user reads them: every `pip install ...` of README.md, and the pip lines of
the Makefile's `make demo` setup (its `.local-installed` recipe, `-e` dropped). Each runs as
`pip install --isolated --dry-run --ignore-installed --report` from the repository root: --isolated
skips this machine's pip configuration (its local wheels and constraints would hide what a stock
machine resolves), --ignore-installed resolves every dependency as a fresh venv would. Prints each
line with its package count and download size, and exits 1 if a forbidden package was resolved.

pip's report names each file but not its size, so the size is the index's Content-Length of each
file (a HEAD request per file); a file whose size the index does not give is counted as unknown, and
this checkout's own projects (built, not downloaded) not at all.

Usage: python tests/client/install_check.py [--root DIR] (DIR: a checkout, by default this one)."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = re.compile(r"^(torch|triton|nvidia-.*|cuda-.*)$")


def readme_lines(text: str) -> list[list[str]]:
    """The arguments of every `pip install ...` in inline code or at the start of a code-block line."""
    found = re.findall(r"`(pip install [^`\n]+)`", text)
    found += [line.strip() for line in text.splitlines() if line.strip().startswith("pip install ")]
    return _unique(shlex.split(line.split("#", 1)[0])[2:] for line in found)


def makefile_lines(text: str, target: str = "$(VENV)/.local-installed") -> list[list[str]]:
    """The arguments of the `$(PIP) install` lines of one recipe, editable flags dropped."""
    lines: list[list[str]] = []
    recipe = False
    for line in text.splitlines():
        if not line.startswith("\t"):
            recipe = line.startswith(target + ":")
            continue
        if recipe and line.strip().startswith("$(PIP) install "):
            lines.append([word for word in shlex.split(line.strip())[2:] if word != "-e"])
    return _unique(lines)


def _unique(lines: Iterable[list[str]]) -> list[list[str]]:
    seen: list[list[str]] = []
    for line in lines:
        if line and line not in seen:
            seen.append(line)
    return seen


def resolve(args: list[str], root: Path) -> list[dict[str, Any]]:
    """What `pip install ARGS` would install in a fresh venv on this platform: the report's entries."""
    with tempfile.TemporaryDirectory(prefix="install-check-") as work:
        report = Path(work) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--isolated", "--disable-pip-version-check"]
        command += ["--dry-run", "--ignore-installed", "--quiet", "--report", str(report), *args]
        subprocess.run(command, cwd=root, check=True, timeout=900)
        entries: list[dict[str, Any]] = json.loads(report.read_text())["install"]
        return entries


def _size(url: str) -> int | None:
    if not url.startswith("https://"):
        return None  # a local directory (this checkout): built, not downloaded
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            length = answer.headers.get("Content-Length")
            return int(length) if length else None
    except OSError:
        return None


def sizes(entries: list[dict[str, Any]]) -> dict[str, int | None]:
    urls = [entry["download_info"]["url"] for entry in entries]
    given = [entry["download_info"].get("size") for entry in entries]
    with ThreadPoolExecutor(8) as pool:
        looked_up = list(pool.map(_size, [url for url, size in zip(urls, given, strict=True) if size is None]))
    answers = iter(looked_up)
    return {url: size if size is not None else next(answers) for url, size in zip(urls, given, strict=True)}


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose lines to check")
    options = parser.parse_args(argv)
    root: Path = options.root.resolve()
    lines = _unique([*readme_lines((root / "README.md").read_text()), *makefile_lines((root / "Makefile").read_text())])
    failed = False
    every: dict[str, int | None] = {}
    for args in lines:
        entries = resolve(args, root)
        by_url = sizes(entries)
        every.update(by_url)
        known = [size for size in by_url.values() if size is not None]
        unknown = sum(1 for url, size in by_url.items() if size is None and url.startswith("https://"))
        bad = sorted(
            f"{entry['metadata']['name']}=={entry['metadata']['version']}"
            for entry in entries
            if FORBIDDEN.match(entry["metadata"]["name"].lower())
        )
        note = f", {unknown} of unknown size" if unknown else ""
        print(f"pip install {shlex.join(args)}: {len(entries)} packages, {_mb(sum(known))} to download{note}")
        if bad:
            failed = True
            print(f"  FAIL: resolves {len(bad)} GPU-sized packages: {', '.join(bad)}")
    total = sum(size for size in every.values() if size is not None)
    files = sum(1 for url in every if url.startswith("https://"))
    print(f"every line together: {files} files from the index, {_mb(total)} to download")
    print("FAIL: a documented install pulls torch/CUDA" if failed else "PASS: no torch, nvidia-*, cuda-* or triton")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
