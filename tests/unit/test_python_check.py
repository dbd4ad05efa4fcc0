"""`make demo`/`make test` name a Python that is too old before installing anything (.ci/python_check.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "python_check.py"


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("python_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_required_version_is_pyprojects() -> None:
    assert _script().required((ROOT / "pyproject.toml").read_text()) == (3, 11)


@pytest.mark.parametrize("found", [(3, 9, 18), (3, 10, 13), (2, 7, 18)])
def test_an_older_python_is_named_with_its_version_and_path(found: tuple[int, int, int]) -> None:
    line = _script().problem(found, (3, 11), "/usr/bin/python3")
    version = ".".join(map(str, found))
    assert line is not None
    assert line.startswith(f"rushmem needs Python 3.11+, found {version} at /usr/bin/python3")
    assert "PYTHON=python3.11" in line


@pytest.mark.parametrize("found", [(3, 11, 0), (3, 13, 1), (4, 0, 0)])
def test_a_recent_enough_python_passes(found: tuple[int, int, int]) -> None:
    assert _script().problem(found, (3, 11), "/usr/bin/python3") is None


def test_the_script_refuses_with_one_line_and_exit_1(tmp_path: Path) -> None:
    """Run as the Makefile runs it, against a pyproject that no Python here can satisfy, and one any can."""
    too_new = tmp_path / "pyproject.toml"
    too_new.write_text('[project]\nname = "x"\nrequires-python = ">=99.0"\n')
    done = subprocess.run([sys.executable, str(SCRIPT), str(too_new)], capture_output=True, text=True, check=False)
    found = ".".join(map(str, sys.version_info[:3]))
    assert done.returncode == 1
    assert done.stderr == f"rushmem needs Python 99.0+, found {found} at {sys.executable}: " + (
        "run make with PYTHON=python99.0 (or the path of a newer Python)\n"
    )
    too_new.write_text('[project]\nrequires-python = ">=3.0"\n')
    done = subprocess.run([sys.executable, str(SCRIPT), str(too_new)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stderr) == (0, "")
