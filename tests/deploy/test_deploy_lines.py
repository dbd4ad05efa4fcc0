"""The deploy lines of README and docs/deployment.md, checked line by line: each make target exists
and runs the project's pinned SAM with a samconfig.toml profile, each `sam` line names a profile
that exists and comes after the page says how to put that SAM first on PATH, and `make deploy`
without a Region stops with one line naming it (exit 3) instead of SAM's `--guided` suggestion."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROFILES = set(tomllib.loads((ROOT / "samconfig.toml").read_text())) - {"version"}
PINNED_SAM = ".venv/tools/sam/bin/sam"


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end > 0 else None]


def _commands(text: str, tool: str) -> list[str]:
    """Every command of ``tool`` the text gives, in code spans and in fenced blocks."""
    found = re.findall(rf"`({tool} [^`]+)`", text)
    for block in re.findall(r"```(?:sh|bash)?\n(.*?)```", text, re.S):
        found += [line.strip() for line in block.splitlines() if line.strip().startswith(f"{tool} ")]
    return found


def _make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-C", str(ROOT), *args], capture_output=True, text=True, env=env, timeout=120)


README = _section((ROOT / "README.md").read_text(), "## Deploying to AWS")
DEPLOYMENT = (ROOT / "docs" / "deployment.md").read_text()


def test_the_readme_deploys_with_make_not_a_sam_on_path() -> None:
    """From a fresh clone `sam` is not on PATH: the README's lines are make targets."""
    assert "make deploy" in README and "make undeploy" in DEPLOYMENT
    assert _commands(README, "sam") == [], "README: run sam through make (the pinned copy), or say how"


@pytest.mark.parametrize("line", sorted(set(_commands(README, "make") + _commands(DEPLOYMENT, "make"))))
def test_each_make_line_is_a_target_that_runs(line: str) -> None:
    args = line.split("#")[0].split()[1:]
    dry = _make("-n", *args)
    assert dry.returncode == 0, f"{line}: {dry.stderr}"
    target = next(a for a in args if "=" not in a)
    if target in {"deploy", "undeploy"}:
        env = dict(a.split("=", 1) for a in args if "=" in a and not a.startswith("DEPLOY_ARGS"))
        verb = "deploy" if target == "deploy" else "delete"
        assert f"{PINNED_SAM} {verb} --config-env {env.get('CONFIG_ENV', 'quickstart')}" in dry.stdout
        assert env.get("CONFIG_ENV", "quickstart") in PROFILES


@pytest.mark.parametrize("line", sorted(set(_commands(DEPLOYMENT, "sam"))))
def test_each_sam_line_names_a_profile_and_follows_the_path_line(line: str) -> None:
    config_env = re.search(r"--config-env (\w+)", line)
    assert config_env is None or config_env.group(1) in PROFILES, line
    path_line = DEPLOYMENT.index('export PATH="$PWD/.venv/tools/sam/bin:$PATH"')
    assert DEPLOYMENT.index(line) > path_line, f"{line}: before the page says which sam"


def test_deploy_without_a_region_is_one_line_and_exit_3(tmp_path: Path) -> None:
    sam_venv = Path(sys.prefix) / "tools" / "sam"  # made by make sam-validate, before the tests
    if not (sam_venv / "bin" / "python").exists():
        pytest.skip("the pinned SAM is not installed (make sam-validate)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"HOME": str(tmp_path), "AWS_CONFIG_FILE": str(tmp_path / "none")}
    # SAM=false: were the Region check to pass, nothing would reach AWS; -o: SAM is not reinstalled.
    done = _make("-o", f"{sam_venv}/.installed", "undeploy", f"SAM_VENV={sam_venv}", "SAM=false", env=env)
    assert done.returncode != 0
    assert "no AWS Region: export AWS_REGION=" in done.stderr and "Error 3" in done.stderr
    assert "--guided" not in done.stdout + done.stderr
