"""How the command line finds its command and the options of the command it runs."""

from __future__ import annotations

import pytest

from rushmem_tools.cli.main import build_parser, command_of


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
