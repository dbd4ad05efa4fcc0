"""Run by the Makefile with the Python it is about to make .venv from, before anything is installed:
a Python older than pyproject.toml's requires-python is named (version and path) at once, instead of a
resolver error from the middle of the install.

Written for any Python 3 (typing's Optional and Tuple, no __future__ import; no tomllib before 3.11, so
requires-python is read with a regular expression).
Usage: python .ci/python_check.py [PYPROJECT]; exits 1 with one line on stderr when the Python is too old."""

import re
import sys
from pathlib import Path
from typing import List, Optional, Tuple

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def required(pyproject_text: str) -> Tuple[int, int]:
    """The (major, minor) of requires-python's ">=X.Y"."""
    found = re.search(r'^requires-python\s*=\s*">=\s*(\d+)\.(\d+)', pyproject_text, re.MULTILINE)
    if found is None:
        raise ValueError('pyproject.toml has no requires-python = ">=X.Y"')
    return int(found.group(1)), int(found.group(2))


def problem(found: Tuple[int, ...], needed: Tuple[int, int], executable: str) -> Optional[str]:
    """The line to print when ``found`` is older than ``needed`` (None: it will do)."""
    if tuple(found[:2]) >= needed:
        return None
    version = ".".join(str(part) for part in found)
    return (
        f"rushmem needs Python {needed[0]}.{needed[1]}+, found {version} at {executable}: "
        f"run make with PYTHON=python{needed[0]}.{needed[1]} (or the path of a newer Python)"
    )


def main(argv: List[str]) -> int:
    pyproject = Path(argv[0]) if argv else PYPROJECT
    line = problem(tuple(sys.version_info[:3]), required(pyproject.read_text(encoding="utf-8")), sys.executable)
    if line is None:
        return 0
    print(line, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
