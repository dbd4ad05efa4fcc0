"""Bulk import of JSON Lines (``rushmem import``): chunked for speed, line by line where a
chunk is refused, so one bad line never keeps the others out."""

from __future__ import annotations

import dataclasses
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


@dataclasses.dataclass
class _Import:
    """One import's run: where lines go (``store``), what it took and skipped (``report``), and the
    lines waiting for the memory their ``superseded_by`` names (it may come later in the file)."""

    store: Callable[[Sequence[ImportLine]], StoredIds]
    report: ImportReport
    check: Callable[[ImportLine], None] | None
    waiting: list[tuple[int, ImportLine, InvalidInput]] = dataclasses.field(default_factory=list)

    def skip(self, number: int, reason: str) -> None:
        self.report.skipped += 1
        self.report.skipped_lines.append(SkippedLine(line=number, reason=reason))
        logger.warning("line %d skipped: %s", number, reason)

    def checked(self, pairs: Sequence[tuple[int, ImportLine]]) -> list[tuple[int, ImportLine]]:
        """The numbered lines that are restorable and that ``check`` takes; the others skipped."""
        kept = []
        for number, line in pairs:
            try:
                check_restorable(line)
                if self.check is not None:
                    self.check(line)
            except InvalidInput as exc:
                self.skip(number, _reason(exc))
            else:
                kept.append((number, line))
        return kept

    def chunk(self, pairs: Sequence[tuple[int, ImportLine]]) -> None:
        """One call for the chunk; when it refuses the chunk, one per line."""
        try:
            stored = self.store([line for _, line in pairs])
        except InvalidInput as exc:
            logger.debug("chunk retried line by line: %s", exc)
            for number, line in pairs:
                self.one(number, line)
        else:
            self.report.taken += len(pairs)
            self.report.created += stored.created

    def one(self, number: int, line: ImportLine) -> None:
        """One line on its own: taken, waiting (its ``superseded_by`` names a memory not stored yet),
        or skipped."""
        try:
            single = self.store([line])
        except InvalidInput as inner:
            if (inner.field or "").endswith("superseded_by"):
                self.waiting.append((number, line, inner))
            else:
                self.skip(number, _reason(inner))
        else:
            self.report.taken += 1
            self.report.created += single.created

    def finish(self) -> None:
        """The waiting lines once the whole file is in, again while one of them gets stored (a chain
        of supersessions in any order); what still names nothing is refused, line by line."""
        while self.waiting:
            again, self.waiting = self.waiting, []
            for number, line, _ in again:
                self.one(number, line)
            if len(self.waiting) == len(again):
                break
        for number, _, refused in sorted(self.waiting, key=lambda item: item[0]):
            self.skip(number, _reason(refused))
        self.report.skipped_lines.sort(key=lambda skipped: skipped.line)


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
    run = _Import(store, report, check)
    chunk: list[tuple[int, ImportLine]] = []

    def flush() -> None:
        kept = run.checked(chunk)
        chunk.clear()
        if kept:
            run.chunk(kept)
            if progress:
                progress(report.taken + report.skipped)

    for number, text in lines:
        try:
            chunk.append((number, ImportLine.model_validate_json(text)))
        except ValidationError as exc:
            run.skip(number, describe_errors(exc, "line"))
            continue
        if len(chunk) >= chunk_size:
            flush()
    flush()
    run.finish()
    return report
