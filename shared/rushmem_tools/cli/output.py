"""What every command shares: JSON Lines on stdout, progress on stderr, input files and times, and
the type of cli.build_parser's ``add`` helper through which each command module registers."""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import logging
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rushmem.service import Memory

# cli.build_parser's ``add(name, command, help)``: a subcommand's parser, its flags still to add.
AddCommand = Callable[[str, Callable[["Memory", argparse.Namespace], int], str], argparse.ArgumentParser]


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def emit(obj: Any, out: IO[str] | None = None) -> None:
    """One JSON document per line on stdout."""
    out = out or sys.stdout
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json")
    out.write(json.dumps(obj, ensure_ascii=False, default=_json_default) + "\n")
    out.flush()


def parse_time(value: str) -> dt.datetime:
    """ISO 8601 (a trailing Z is fine); naive times are UTC."""
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _duration(seconds: float) -> str:
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


class Progress:
    """A one-line counter on stderr, only when stderr is a terminal: what is done (of the total, when
    known), the rate, and the time left. A log record (a warning) printed meanwhile gets a line of its
    own above the counter, which is drawn again below it."""

    # Erase the line the cursor is on (ECMA-48 EL), from its start.
    _ERASE = "\r\x1b[K"

    def __init__(
        self, label: str, total: int | None = None, *, stream: IO[str] | None = None, clock: Any = time.monotonic
    ) -> None:
        self.label, self.total = label, total
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self._clock = clock
        self._started = clock()
        self._last = -1.0
        self._line = ""  # the counter as last drawn ("" once erased)
        self._done: int | None = None
        self._handlers: list[tuple[logging.StreamHandler[Any], Any]] = []
        if self.enabled:
            self._reroute_logs()

    def text(self, done: int, now: float) -> str:
        elapsed = now - self._started
        rate = done / elapsed if elapsed > 0 else 0.0
        shown = f"{self.label}: {done:,}" + (f"/{self.total:,}" if self.total else "")
        if rate > 0:
            shown += f", {rate:,.0f}/s"
            if self.total and self.total > done:
                shown += f", {_duration((self.total - done) / rate)} left"
        return shown

    def update(self, done: int, force: bool = False) -> None:
        self._done = done
        now = self._clock()
        if not self.enabled or (not force and now - self._last < 0.2):
            return
        self._last = now
        self._line = self.text(done, now)
        self.stream.write(self._ERASE + self._line)
        self.stream.flush()

    def close(self) -> None:
        """The last count (updates in between may have been skipped), and the terminal's line back."""
        for handler, stream in self._handlers:
            handler.setStream(stream)
        self._handlers = []
        if self.enabled and self._done is not None:
            self.update(self._done, force=True)
            self.stream.write("\n")
            self._line = ""

    def _reroute_logs(self) -> None:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is self.stream:
                self._handlers.append((handler, handler.setStream(_AboveProgress(self))))

    def _write_above(self, text: str) -> None:
        if self._line:
            self.stream.write(self._ERASE)
        self.stream.write(text)
        if self._line and text.endswith("\n"):
            self.stream.write(self._line)
        self.stream.flush()


class _AboveProgress(io.TextIOBase):
    """The stream a log handler writes to while a progress counter is on the terminal."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress

    def write(self, text: str) -> int:
        self._progress._write_above(text)
        return len(text)

    def flush(self) -> None:
        self._progress.stream.flush()


def read_jsonl(path: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of the non-blank lines of a file, or of stdin for '-'."""
    # Bytes that are not UTF-8 are kept as lone surrogates: the line holding them is refused alone
    # (no text field takes one), and the lines around it are still read.
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8", errors="surrogateescape")  # noqa: SIM115
    try:
        for number, line in enumerate(stream, start=1):
            if line.strip():
                yield number, line
    finally:
        if stream is not sys.stdin:
            stream.close()
