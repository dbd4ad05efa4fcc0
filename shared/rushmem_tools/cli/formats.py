"""`rushmem import --format mem0|oms|chatgpt FILE` and `rushmem export --format mem0|oms`: other
systems' files in and out (:mod:`rushmem_tools.formats`; docs/import-export.md).

Memories (mem0, OMS) become import lines and go in as `rushmem import` takes them (chunked, a bad
record skipped with its reason); conversations (chatgpt) go through extraction, as `ingest` takes
them. The exit codes are import's: 0 all in, 6 some skipped, 2 none could be taken."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from rushmem.ingest.importing import ImportReport, SkippedLine
from rushmem.service import Caller, Memory
from rushmem_contract import operations as ops
from rushmem_contract.errors import AgentMemoryError, InvalidInput
from rushmem_contract.kinds import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE
from rushmem_contract.models import ConversationEnded, ImportLine, describe_errors
from rushmem_tools.cli.output import emit
from rushmem_tools.formats import Record, chat, mem0, oms

IMPORT_FORMATS = ("rushmem", "mem0", "oms", "chatgpt")
EXPORT_FORMATS = ("rushmem", "mem0", "oms")
READERS = {"mem0": mem0.read, "oms": oms.read}


def import_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=IMPORT_FORMATS,
        default="rushmem",
        help="rushmem: our import lines (default); mem0: mem0's get_all JSON; oms: Open Memory Specification "
        "grains (JSON); chatgpt: a conversation export (conversations.json, or a list of {role, content}), "
        "extracted as ingest does",
    )
    parser.add_argument("--user", dest="user_id", help="the owner of records that name none (chatgpt: required)")
    parser.add_argument("--project", dest="project_id", help="the project the imported memories belong to")


def export_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=EXPORT_FORMATS,
        default="rushmem",
        help="rushmem: import lines (default); mem0: one JSON document shaped as mem0's get_all (current "
        "memories only); oms: Open Memory Specification Fact grains, one per line",
    )


def _text(path: str) -> str:
    return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8", errors="surrogateescape")


def _finish(report: ImportReport, started: float, unit: str) -> int:
    report.skipped_lines.sort(key=lambda line: line.line)
    emit({**report.model_dump(mode="json"), "seconds": round(time.monotonic() - started, 3)})
    if not report.skipped:
        return EXIT_OK
    first = "; ".join(f"{s.reason}" for s in report.skipped_lines[:3])
    more = f" and {report.skipped - 3} more" if report.skipped > 3 else ""
    print(f"rushmem: imported {report.taken} {unit}; skipped {report.skipped}: {first}{more}", file=sys.stderr)
    return EXIT_PARTIAL if report.taken else EXIT_USAGE


def import_records(service: Memory, args: argparse.Namespace) -> int:
    """A mem0 or OMS file: each record an import line, stored as `rushmem import` stores lines."""
    started = time.monotonic()
    report = ImportReport()
    records = READERS[args.format](_text(args.file), user_id=args.user_id, project_id=args.project_id)

    def lines(records: Iterator[Record]) -> Iterator[tuple[int, str]]:
        for number, line in records:
            if isinstance(line, str):  # refused before it is a line: skipped with its reason
                report.skipped += 1
                report.skipped_lines.append(SkippedLine(line=number, reason=line))
                continue
            yield number, json.dumps(line, ensure_ascii=False)

    service.admin.import_jsonl(lines(records), report, source=args.format)
    return _finish(report, started, "records")


def import_chat(service: Memory, args: argparse.Namespace) -> int:
    """A chat export: each conversation's windows through extraction, as `rushmem ingest` runs them."""
    if not args.user_id:
        raise InvalidInput("--format chatgpt needs --user (a chat export does not say whose it is)", field="user_id")
    started = time.monotonic()
    report = ImportReport()  # taken/skipped count conversations here
    window = service.settings.extraction_window
    extracted = created = 0
    conversations = chat.read(_text(args.file), user_id=args.user_id, window=window, project_id=args.project_id)
    for number, messages in conversations:
        if isinstance(messages, str):
            report.skipped += 1
            report.skipped_lines.append(SkippedLine(line=number, reason=messages))
            continue
        try:
            outcomes = [service.ingest_conversation(ConversationEnded.model_validate(m)) for m in messages]
        except ValidationError as exc:
            reason = f"conversation {number}: {describe_errors(exc, 'message')}"
            report.skipped += 1
            report.skipped_lines.append(SkippedLine(line=number, reason=reason))
            continue
        except InvalidInput as exc:
            report.skipped += 1
            field = f"{exc.field}: " if exc.field else ""
            report.skipped_lines.append(SkippedLine(line=number, reason=f"conversation {number}: {field}{exc}"))
            continue
        report.taken += 1
        extracted += sum(o.extracted for o in outcomes)
        created += sum(o.created for o in outcomes)
    report.created = created
    print(f"rushmem: {extracted} memories extracted from {report.taken} conversations", file=sys.stderr)
    return _finish(report, started, "conversations")


def run_import(service: Memory, args: argparse.Namespace) -> int | None:
    """The format's import, or None for our own lines (import's usual path)."""
    if args.format == "rushmem":
        return None
    try:
        if args.format == "chatgpt":
            return import_chat(service, args)
        return import_records(service, args)
    except AgentMemoryError:
        raise
    except ValueError as exc:  # a reader's refusal of the whole file
        raise InvalidInput(str(exc), field="file") from exc


def _export_lines(service: Memory, args: argparse.Namespace) -> Iterator[ImportLine]:
    from rushmem_tools.cli.operations import request_of

    request = request_of(ops.EXPORT, args)
    caller = Caller(door="cli", requested_by="cli")
    while True:
        page = service.invoke(ops.EXPORT, request, caller=caller)
        yield from page.lines
        if page.next_cursor is None:
            return
        request = request.model_copy(update={"cursor": page.next_cursor})


def run_export(service: Memory, args: argparse.Namespace) -> bool:
    """`export --format mem0|oms`: the export in that format (False: our own lines, as usual)."""
    if getattr(args, "format", "rushmem") == "rushmem":
        return False
    if args.out:
        with Path(args.out).open("w", encoding="utf-8") as out:
            _write_export(service, args, out)
    else:
        _write_export(service, args, sys.stdout)
    return True


def _write_export(service: Memory, args: argparse.Namespace, out: IO[str]) -> None:
    lines = _export_lines(service, args)
    if args.format == "mem0":
        document, left = mem0.write(lines)
        out.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
        if left:
            print(
                f"rushmem: {left} superseded or ended memories left out (mem0 holds current memories only; "
                "--format oms keeps them)",
                file=sys.stderr,
            )
        return
    for grain in oms.write(lines):
        emit(grain, out)
