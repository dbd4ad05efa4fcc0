"""What every command shares: JSON Lines on stdout, progress on stderr, input files and times."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
import uuid
from collections.abc import Iterator
from typing import IO, Any


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


class Progress:
    """A one-line counter on stderr, only when stderr is a terminal."""

    def __init__(self, label: str, total: int | None = None) -> None:
        self.label, self.total = label, total
        self.enabled = sys.stderr.isatty()
        self._last = 0.0

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self._last < 0.2):
            return
        self._last = now
        of = f"/{self.total}" if self.total else ""
        sys.stderr.write(f"\r{self.label}: {done}{of}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


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
