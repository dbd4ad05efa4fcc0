"""Each CLI command imports what it runs: the benchmarks and the HTTP server only for their commands."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent_memory_tools.cli.main import build_parser, command_of

LAZY = (
    "agent_memory_tools.bench.quality",
    "agent_memory_tools.bench.latency",
    "agent_memory_tools.local.server",
    "http.server",
    # smoke's HTTP client, serve --jwt-issuer's JOSE library
    "agent_memory_client.http",
    "jwt",
)


def _modules_after(argv: list[str]) -> set[str]:
    code = (
        "import sys\n"
        "from agent_memory_tools.cli.main import main\n"
        f"code = main({argv!r})\n"
        f"print(' '.join(m for m in {LAZY!r} if m in sys.modules))\n"
        "sys.exit(code)\n"
    )
    env = {"AGENT_MEMORY_DATABASE_URL": "postgresql://nobody@unreachable.invalid/x", "PATH": "/usr/bin"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split("\n")[-2].split())


def test_a_command_imports_neither_the_benchmarks_nor_the_server() -> None:
    assert _modules_after(["config"]) == set()


def test_the_bench_command_still_gets_its_options() -> None:
    args = build_parser("bench").parse_args(["bench", "quality", "--k", "5"])
    assert args.k == 5
    assert "bench" in build_parser("recall").format_help()


@pytest.mark.parametrize(
    ("argv", "command"),
    [(["recall", "--user", "u", "q"], "recall"), (["-v", "bench", "quality"], "bench"), (["--help"], None), ([], None)],
)
def test_the_command_is_the_first_word_that_is_no_option(argv: list[str], command: str | None) -> None:
    assert command_of(argv) == command
