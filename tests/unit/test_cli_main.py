"""How the command line finds its command and the options of the command it runs."""

from __future__ import annotations

import pytest

from rushmem_tools.cli.main import build_parser, command_of, parse


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


@pytest.mark.parametrize(
    ("typed", "suggested"),
    [("serach", "recall"), ("search", "recall"), ("improt", "import"), ("ingets", "ingest"), ("delete", "forget")],
)
def test_an_unknown_command_is_answered_with_the_nearest_one(
    capsys: pytest.CaptureFixture[str], typed: str, suggested: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        parse([typed, "--user", "u", "tea"])
    assert exited.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"rushmem: error: unknown command {typed!r}: did you mean {suggested}"), last


def test_a_word_near_no_command_points_to_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(["xyzzy"])
    assert capsys.readouterr().err.strip().endswith("unknown command 'xyzzy': `rushmem --help` lists them")
