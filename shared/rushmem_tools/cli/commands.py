"""The memory commands of ``rushmem``: each parses its arguments, calls one service method and
prints JSON Lines. Exit codes are the error table's (:mod:`rushmem_contract.kinds`)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pydantic import ValidationError

from rushmem.ingest.importing import ImportReport
from rushmem.service import Memory, set_service
from rushmem_contract.errors import InvalidInput
from rushmem_contract.kinds import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE
from rushmem_contract.models import (
    RecallQuery,
    RecallResult,
    describe_errors,
)
from rushmem_tools.cli.formats import run_import
from rushmem_tools.cli.memories import wrong_file
from rushmem_tools.cli.output import Progress, emit, read_jsonl
from rushmem_tools.cli.text import for_humans, write_settings

RECALL_CHUNK = 64  # queries embedded per batch by `recall --queries`


def cmd_migrate(service: Memory, args: argparse.Namespace) -> int:
    result = service.admin.migrate()
    emit(
        {
            "applied": result.applied,
            "embedder": service.admin.embedder.fingerprint,
            # after a restore: the erasures the ledger held and the database lacked, done again
            "erasures_reapplied": result.erasures_reapplied,
        }
    )
    return EXIT_OK


def cmd_import(service: Memory, args: argparse.Namespace) -> int:
    other = run_import(service, args)  # mem0, OMS, a chat export
    if other is not None:
        return other
    started = time.monotonic()
    report = ImportReport()
    progress = Progress("lines")
    if progress.enabled and args.file != "-":
        progress.total = sum(1 for _ in read_jsonl(args.file))  # the time left needs it; a file reads fast
    try:
        service.admin.import_jsonl(read_jsonl(args.file), report, source=args.source, progress=progress.update)
    finally:
        progress.close()
        # Printed even when a later chunk failed: what was taken before is committed.
        emit({**report.model_dump(mode="json"), "seconds": round(time.monotonic() - started, 3)})
    if not report.skipped:
        return EXIT_OK
    print(f"rushmem: {skipped_statement(report)}", file=sys.stderr)
    if report.taken:
        # What could be taken went in (committed); what was skipped, and why, is in the summary and
        # on stderr. A code of its own, so that a script tells a partial import from a whole one.
        return EXIT_PARTIAL
    hint = _whole_file_hint(args.file)
    if hint:
        print(f"rushmem: not import lines: {hint}", file=sys.stderr)
    return EXIT_USAGE  # nothing could be taken: the file is the mistake


def _whole_file_hint(path: str, largest: int = 1 << 20) -> str | None:
    """Which command a file no line of which could be imported is for (an event, conversations)."""
    if path == "-" or Path(path).stat().st_size > largest:
        return None
    return wrong_file(Path(path).read_text(encoding="utf-8", errors="replace"), path, "import")


def skipped_statement(report: ImportReport, shown: int = 10) -> str:
    """One sentence on what an import left out: how many lines, which (the first few), where the reasons are."""
    numbers = [str(line.line) for line in report.skipped_lines[:shown]]
    more = f" and {report.skipped - len(numbers)} more" if report.skipped > len(numbers) else ""
    plural = "s" if report.skipped != 1 else ""
    return (
        f"imported {report.taken} line{'s' if report.taken != 1 else ''}; skipped {report.skipped} line{plural} "
        f"it could not take (line{plural} {', '.join(numbers)}{more}: the reasons are in the summary's skipped_lines)"
    )


def _recall_payload(result: RecallResult) -> dict[str, object]:
    payload: dict[str, object] = {
        "memories": [m.model_dump(mode="json") for m in result.memories],
        "prompt_block": result.prompt_block,
    }
    if result.explanation is not None:
        payload["explanation"] = result.explanation.model_dump(mode="json")
    return payload


def recall_flags(parser: argparse.ArgumentParser) -> None:
    """`recall --queries FILE --out FILE`: many recalls, embedded in batches (benchmarks)."""
    parser.add_argument(
        "--queries", help="JSON Lines of {user_id, query, project_id?, now?, limit?}; --out gets a line per query"
    )


def recall_file(service: Memory, args: argparse.Namespace) -> bool:
    """With --queries: one output line per input line (results stay aligned with the queries), then
    a summary; False without (the one recall of the flags)."""
    if not args.queries:
        return False
    if not args.out:
        raise InvalidInput("--queries needs --out FILE", field="out")
    started = time.monotonic()
    lines = list(read_jsonl(args.queries))
    progress = Progress("recalled", len(lines))
    done = failed = 0
    problems: list[dict[str, object]] = []
    out_path = Path(args.out)
    with out_path.open("w", encoding="utf-8") as out:
        for start in range(0, len(lines), RECALL_CHUNK):
            batch = lines[start : start + RECALL_CHUNK]
            parsed: list[RecallQuery | str] = []
            for _number, text in batch:
                try:
                    parsed.append(RecallQuery.model_validate_json(text))
                except ValidationError as exc:
                    parsed.append(describe_errors(exc, "line"))
            results = iter(service.recall_batch([p for p in parsed if isinstance(p, RecallQuery)], limit=args.limit))
            for (number, _text), item in zip(batch, parsed, strict=True):
                outcome = item if isinstance(item, str) else next(results)
                if isinstance(outcome, RecallResult):
                    emit(_recall_payload(outcome), out)
                    done += 1
                    continue
                failed += 1
                problems.append({"line": number, "reason": str(outcome)})
                emit({"memories": [], "prompt_block": "", "error": str(outcome)}, out)
            progress.update(done + failed)
    progress.close()
    emit(
        {
            "queries": len(lines),
            "recalled": done,
            "failed": failed,
            "seconds": round(time.monotonic() - started, 3),
            "out": str(out_path),
            "failed_lines": problems,
        }
    )
    return True


def cmd_move_user(service: Memory, args: argparse.Namespace) -> int:
    """Move everything a user owns to another cell (RUSHMEM_CELLS; docs/capacity.md, Cells)."""
    moved = service.move_user(args.user, args.to)
    emit({"user_id": args.user, "cell": args.to, "moved": moved})
    return EXIT_OK


def cmd_purge(service: Memory, args: argparse.Namespace) -> int:
    emit(service.admin.purge(now=args.now, superseded_days=args.superseded_days))
    return EXIT_OK


def cmd_reembed(service: Memory, args: argparse.Namespace) -> int:
    if args.drop_previous:
        emit({"dropped_previous": service.admin.drop_previous_vectors()})
        return EXIT_OK
    progress = Progress("re-embedded")
    try:
        result = service.admin.reembed(
            batch_size=args.batch_size, restart=args.restart, max_batches=args.max_batches, progress=progress.update
        )
    finally:
        progress.close()
    emit(result)
    return EXIT_OK


def cmd_dense_users(service: Memory, args: argparse.Namespace) -> int:
    report = service.admin.refresh_dense_users(min_memories=args.min_memories, max_seconds=args.max_seconds)
    print(report.summary(), file=sys.stderr)
    emit(report)
    return EXIT_OK


def cmd_consolidate(service: Memory, args: argparse.Namespace) -> int:
    report = service.admin.consolidate(
        max_seconds=args.max_seconds, cursor=args.cursor, restart=args.restart, threshold=args.threshold
    )
    print(report.summary(), file=sys.stderr)
    emit(report)
    return EXIT_OK


def cmd_similarity(service: Memory, args: argparse.Namespace) -> int:
    threshold = service.settings.supersede_min_similarity
    for text, similarity in zip(args.others, service.admin.similarities(args.text, args.others), strict=True):
        emit({"text": text, "similarity": round(similarity, 4), "may_update": similarity >= threshold})
    return EXIT_OK


def cmd_config(service: Memory, args: argparse.Namespace) -> int:
    from rushmem.config import Settings
    from rushmem_tools.settings_table import effective_settings, settings_table, with_settings_table

    if args.write_table:
        path = Path(args.write_table)
        path.write_text(with_settings_table(path.read_text(encoding="utf-8")), encoding="utf-8")
    elif args.markdown:
        sys.stdout.write(settings_table() + "\n")
    elif for_humans(args):
        defaults = effective_settings(Settings.model_construct())
        write_settings(effective_settings(service.settings), defaults, sys.stdout)
    else:
        emit(effective_settings(service.settings))
    return EXIT_OK


def cmd_invoke(service: Memory, args: argparse.Namespace) -> int:
    from rushmem_tools.local import runtime
    from rushmem_tools.local.stack import event_path, template_path

    set_service(service)  # the handler runs on this command's settings
    event = runtime.read_event(event_path(args.event))
    emit(runtime.invoke(template_path(args.template), args.logical_id, event))
    return EXIT_OK


def cmd_demo(service: Memory, args: argparse.Namespace) -> int:
    from rushmem_tools.local.demo import run_demo

    set_service(service)  # the handlers run on this command's settings: one model load
    return run_demo(sys.stdout, keep=args.keep)
