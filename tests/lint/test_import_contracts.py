"""Each import-linter contract in pyproject.toml catches a violation planted in a copy of the packages.

A contract that nothing could break would keep the layering only on paper: for each one, a copy of
``shared/`` gets one wrong import (in a module that exists, or in a new one, since a new module must
not slip past a contract), and ``lint-imports`` on that copy must report that contract broken.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

# contract id -> [(module file under shared/, the line planted at its end), ...]
PLANTS: dict[str, list[tuple[str, str]]] = {
    "runtime-alone": [("rushmem/service/planted.py", "import rushmem_tools.cli")],
    "contract-pure": [("rushmem_contract/planted.py", "import rushmem.config")],
    "client-alone": [("rushmem_client/planted.py", "import numpy")],
    "runtime-layers": [("rushmem/providers/planted.py", "import rushmem.service")],
    "acyclic": [
        ("rushmem/recall/planted.py", "import rushmem.ingest.planted"),
        ("rushmem/ingest/planted.py", "import rushmem.recall.planted"),
    ],
    "http-edge": [("rushmem/http/planted.py", "import rushmem.service")],
    "routes-thin": [("rushmem/routes/memories.py", "import rushmem.store.memories")],
    "sql-in-store": [("rushmem/recall/planted.py", "import psycopg")],
    "io-in-providers": [("rushmem/ingest/planted.py", "import httpx")],
    "pure-steps": [("rushmem/recall/scoring.py", "import rushmem.store.engine.connection")],
}


def contract_ids() -> list[str]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    return [c["id"] for c in config["contracts"]]


def test_every_contract_has_a_planted_violation() -> None:
    assert sorted(PLANTS) == sorted(contract_ids())


def lint(tree: Path, contract: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree / "shared")}
    return subprocess.run(
        [str(LINT_IMPORTS), str(tree / "pyproject.toml"), "--contract", contract, "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tree = tmp_path_factory.mktemp("contracts")
    shutil.copy(REPO / "pyproject.toml", tree / "pyproject.toml")
    # The Python packages only: the TypeScript package's installs are large, and ai7/node_modules
    # links back to the package itself (a cycle for a copy that follows links).
    skipped = shutil.ignore_patterns("__pycache__", "*.egg-info", "typescript", "build")
    shutil.copytree(REPO / "shared", tree / "shared", ignore=skipped)
    return tree


@pytest.mark.parametrize("contract", sorted(PLANTS))
def test_a_planted_violation_breaks_its_contract(contract: str, pristine: Path, tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    shutil.copytree(pristine, tree)
    for module, line in PLANTS[contract]:
        path = tree / "shared" / module
        path.write_text((path.read_text() if path.exists() else "") + f"\n{line}  # planted\n")
    result = lint(tree, contract)
    assert result.returncode != 0, f"{contract} kept despite {PLANTS[contract]}:\n{result.stdout}"
    assert "BROKEN" in result.stdout, result.stdout + result.stderr


def test_the_unplanted_packages_keep_every_contract(pristine: Path) -> None:
    for contract in contract_ids():
        result = lint(pristine, contract)
        assert result.returncode == 0, result.stdout + result.stderr
