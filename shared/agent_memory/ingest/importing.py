"""Bulk import of JSON Lines (``agent-memory import``): chunked for speed, line by line where a
chunk is refused, so one bad line never keeps the others out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from pydantic import BaseModel, Field, ValidationError

from agent_memory_contract.errors import InvalidInput
from agent_memory_contract.models import ImportLine, StoredIds, WriteId, describe_errors

logger = logging.getLogger(__name__)

CHUNK = 512


class SkippedLine(BaseModel):
    line: int
    reason: str


class ImportReport(BaseModel):
    """What an import took so far: it grows as chunks commit, so it stays true if a later chunk fails."""

    taken: int = 0
    created: int = 0
    skipped: int = 0
    skipped_lines: list[SkippedLine] = Field(default_factory=list)
    write_id: WriteId = None  # the import's one write id, recorded with every memory and event it wrote


def _reason(exc: InvalidInput) -> str:
    """The refusal of one line, naming the field ("metadata: ...", not the chunk's "lines[0].metadata")."""
    field = (exc.field or "").removeprefix("lines[0]").lstrip(".")
    return f"{field}: {exc}" if field else str(exc)


def _skip(report: ImportReport, number: int, reason: str) -> None:
    report.skipped += 1
    report.skipped_lines.append(SkippedLine(line=number, reason=reason))
    logger.warning("line %d skipped: %s", number, reason)


def _checked(
    pairs: Sequence[tuple[int, ImportLine]], check: Callable[[ImportLine], None] | None, report: ImportReport
) -> list[tuple[int, ImportLine]]:
    """The numbered lines ``check`` takes; the others recorded as skipped."""
    kept = []
    for number, line in pairs:
        try:
            if check is not None:
                check(line)
        except InvalidInput as exc:
            _skip(report, number, _reason(exc))
        else:
            kept.append((number, line))
    return kept


def _store_chunk(
    pairs: Sequence[tuple[int, ImportLine]], store: Callable[[Sequence[ImportLine]], StoredIds], report: ImportReport
) -> None:
    """One call for the chunk; when it refuses the chunk, one per line, skipping those it refuses."""
    try:
        stored = store([line for _, line in pairs])
    except InvalidInput as exc:
        logger.debug("chunk retried line by line: %s", exc)
        for number, line in pairs:
            try:
                single = store([line])
            except InvalidInput as inner:
                _skip(report, number, _reason(inner))
            else:
                report.taken += 1
                report.created += single.created
    else:
        report.taken += len(pairs)
        report.created += stored.created


def import_lines(
    lines: Iterable[tuple[int, str]],
    store: Callable[[Sequence[ImportLine]], StoredIds],
    report: ImportReport,
    *,
    progress: Callable[[int], None] | None = None,
    chunk_size: int = CHUNK,
    check: Callable[[ImportLine], None] | None = None,
) -> ImportReport:
    """Store numbered JSON lines with ``store``, ``chunk_size`` lines per call; lines that do not
    validate, that ``check`` refuses (the configured limits) or that ``store`` refuses on their
    own are recorded in ``report`` and skipped.

    Lines ``check`` refuses leave the chunk before it is stored, so the rest is still stored in
    one call, as if they had never been there: the same fact on two lines folds the same way
    (the first statement wins) whatever else the chunk held."""
    chunk: list[tuple[int, ImportLine]] = []

    def flush() -> None:
        kept = _checked(chunk, check, report)
        chunk.clear()
        if not kept:
            return
        _store_chunk(kept, store, report)
        if progress:
            progress(report.taken + report.skipped)

    for number, text in lines:
        try:
            chunk.append((number, ImportLine.model_validate_json(text)))
        except ValidationError as exc:
            _skip(report, number, describe_errors(exc, "line"))
            continue
        if len(chunk) >= chunk_size:
            flush()
    flush()
    return report
