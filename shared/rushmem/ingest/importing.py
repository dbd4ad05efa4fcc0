"""Bulk import of JSON Lines (``rushmem import``): chunked for speed, line by line where a
chunk is refused, so one bad line never keeps the others out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence

from pydantic import BaseModel, Field, ValidationError

from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import ImportLine, StoredIds, WriteId, describe_errors

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


def check_restorable(line: ImportLine) -> None:
    """InvalidInput naming the field when storing ``line`` would store another memory than it states:
    current instead of superseded (``superseded_by`` on a line without the id a restore keeps),
    superseded by itself, or true for no time (``valid_until``, or ``superseded_at`` standing for it,
    before ``valid_from``, or ``created_at`` standing for that). A line is refused, never altered.
    Checked on import only: an export writes what is stored, as it is."""
    if line.superseded_by is not None:
        if line.id is None:
            raise InvalidInput(
                "superseded_by needs the line's id (an exported memory carries both)", field="superseded_by"
            )
        if line.superseded_by == line.id:
            raise InvalidInput(
                "superseded_by names the line's own memory: a memory cannot replace itself", field="superseded_by"
            )
    end, end_name = (line.valid_until, "valid_until") if line.valid_until else (line.superseded_at, "superseded_at")
    start, start_name = (line.valid_from, "valid_from") if line.valid_from else (line.created_at, "created_at")
    if end is not None and start is not None and end < start:
        raise InvalidInput(
            f"{end_name} ({end.isoformat()}) precedes {start_name} ({start.isoformat()})", field=end_name
        )


def _skip(report: ImportReport, number: int, reason: str) -> None:
    report.skipped += 1
    report.skipped_lines.append(SkippedLine(line=number, reason=reason))
    logger.warning("line %d skipped: %s", number, reason)


def _checked(
    pairs: Sequence[tuple[int, ImportLine]], check: Callable[[ImportLine], None] | None, report: ImportReport
) -> list[tuple[int, ImportLine]]:
    """The numbered lines that are restorable and that ``check`` takes; the others recorded as skipped."""
    kept = []
    for number, line in pairs:
        try:
            check_restorable(line)
            if check is not None:
                check(line)
        except InvalidInput as exc:
            _skip(report, number, _reason(exc))
        else:
            kept.append((number, line))
    return kept


Waiting = list[tuple[int, ImportLine, InvalidInput]]


def _store_one(
    number: int,
    line: ImportLine,
    store: Callable[[Sequence[ImportLine]], StoredIds],
    report: ImportReport,
    waiting: Waiting,
) -> None:
    """One line on its own: taken, waiting (its ``superseded_by`` names a memory not stored yet,
    which may come later in the file), or skipped."""
    try:
        single = store([line])
    except InvalidInput as inner:
        if _successor_missing(inner):
            waiting.append((number, line, inner))
        else:
            _skip(report, number, _reason(inner))
    else:
        report.taken += 1
        report.created += single.created


def _store_chunk(
    pairs: Sequence[tuple[int, ImportLine]],
    store: Callable[[Sequence[ImportLine]], StoredIds],
    report: ImportReport,
    waiting: Waiting,
) -> None:
    """One call for the chunk; when it refuses the chunk, one per line."""
    try:
        stored = store([line for _, line in pairs])
    except InvalidInput as exc:
        logger.debug("chunk retried line by line: %s", exc)
        for number, line in pairs:
            _store_one(number, line, store, report, waiting)
    else:
        report.taken += len(pairs)
        report.created += stored.created


def _store_waiting(store: Callable[[Sequence[ImportLine]], StoredIds], report: ImportReport, waiting: Waiting) -> None:
    """The waiting lines once the whole file is in, again while one of them gets stored (a chain of
    supersessions in any order); what still names nothing is refused, line by line."""
    while waiting:
        again = list(waiting)
        waiting.clear()
        for number, line, _ in again:
            _store_one(number, line, store, report, waiting)
        if len(waiting) == len(again):
            break
    for number, _, refused in sorted(waiting, key=lambda item: item[0]):
        _skip(report, number, _reason(refused))


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
    waiting: Waiting = []

    def flush() -> None:
        kept = _checked(chunk, check, report)
        chunk.clear()
        if not kept:
            return
        _store_chunk(kept, store, report, waiting)
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
    _store_waiting(store, report, waiting)
    report.skipped_lines.sort(key=lambda skipped: skipped.line)
    return report


def _successor_missing(exc: InvalidInput) -> bool:
    return (exc.field or "").endswith("superseded_by")
