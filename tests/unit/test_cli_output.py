"""What a person sees on a terminal during long work: a counter with the total, the rate and the time
left, and warnings on lines of their own."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from rushmem_tools.cli.output import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def stderr_log() -> Iterator[tuple[Terminal, logging.Logger]]:
    """A terminal, and a logger whose records go to it through a handler on the root logger (as the
    command line's logging.basicConfig sets it up)."""
    terminal = Terminal()
    handler = logging.StreamHandler(terminal)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield terminal, logging.getLogger("rushmem.ingest.importing")
    finally:
        root.removeHandler(handler)


def screen(written: str) -> list[str]:
    """The lines a terminal shows: a carriage return and an erase start a line over."""
    rows = written.replace("\x1b[K", "").split("\n")
    if rows[-1] == "":
        rows.pop()
    return [row.rsplit("\r", 1)[-1] for row in rows]


def test_the_counter_shows_the_total_the_rate_and_the_time_left() -> None:
    clock, terminal = Clock(), Terminal()
    progress = Progress("lines", 10_000, stream=terminal, clock=clock)
    clock.now += 4
    progress.update(1_000)
    assert screen(terminal.getvalue()) == ["lines: 1,000/10,000, 250/s, 36s left"]
    clock.now += 36
    progress.update(9_000)
    assert screen(terminal.getvalue())[-1] == "lines: 9,000/10,000, 225/s, 4s left"
    progress.close()
    assert terminal.getvalue().endswith("\n")


def test_without_a_total_the_counter_shows_the_rate_only() -> None:
    clock, terminal = Clock(), Terminal()
    progress = Progress("lines", stream=terminal, clock=clock)
    clock.now += 2
    progress.update(500)
    assert screen(terminal.getvalue()) == ["lines: 500, 250/s"]


def test_long_work_is_given_in_minutes_and_hours() -> None:
    clock = Clock()
    progress = Progress("lines", 1_000_000, stream=Terminal(), clock=clock)
    clock.now += 10
    assert progress.text(1_000, clock.now).endswith("2h 46m left")
    assert progress.text(100_000, clock.now).endswith("1m 30s left")


def test_a_warning_gets_a_line_of_its_own_and_the_counter_comes_back_below_it(
    stderr_log: tuple[Terminal, logging.Logger],
) -> None:
    terminal, log = stderr_log
    clock = Clock()
    progress = Progress("lines", 4, stream=terminal, clock=clock)
    clock.now += 1
    progress.update(1)
    log.warning("line 2 skipped: content: Field required")
    clock.now += 1
    progress.update(4)
    progress.close()
    log.warning("after the import")  # the handler writes to the terminal itself again
    assert screen(terminal.getvalue()) == [
        "WARNING rushmem.ingest.importing: line 2 skipped: content: Field required",
        "lines: 4/4, 2/s",
        "WARNING rushmem.ingest.importing: after the import",
    ]


def test_off_a_terminal_nothing_is_drawn_and_logs_are_untouched(stderr_log: tuple[Terminal, logging.Logger]) -> None:
    terminal, log = stderr_log
    piped = io.StringIO()
    progress = Progress("lines", 4, stream=piped)
    progress.update(1, force=True)
    log.warning("line 2 skipped")
    progress.close()
    assert piped.getvalue() == ""
    assert not progress.enabled
    assert terminal.getvalue() == "WARNING rushmem.ingest.importing: line 2 skipped\n"
