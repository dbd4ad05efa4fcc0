"""The commands for one memory and for a user's whole store: get, update, export, ingest, and the
filters recall and list share. Each calls one service method and prints JSON Lines."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import ValidationError

from rushmem.service import Memory
from rushmem_contract.errors import InvalidInput
from rushmem_contract.kinds import EXIT_ERROR, EXIT_OK
from rushmem_contract.models import MAX_PAGE, ConversationEnded, MemoryChanges, MemoryFilters, describe_errors
from rushmem_contract.schemas import filter_kind
from rushmem_tools.cli.output import emit, parse_time


def _json_arg(value: str, field: str) -> Any:
    try:
        return json.loads(value)
    except RecursionError:
        raise InvalidInput(f"--{field} is nested too deeply", field=field) from None
    except ValueError as exc:
        raise InvalidInput(f"--{field} is not JSON: {exc}", field=field) from exc


# The filters whose flag is not the field's name: a category is given once per flag, and
# `--metadata` sets the memory's own metadata in `add`, hence the filter's other destination.
_FLAGS = {"categories": ("--category", "categories"), "metadata": ("--metadata", "metadata_filter")}


def filter_flag(name: str) -> tuple[str, str]:
    """The flag of the filter ``name`` and where argparse puts its value."""
    return _FLAGS.get(name, ("--" + name.replace("_", "-"), name))


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """The filters of recall and list: one flag per field of MemoryFilters, described as the
    model describes it (a list's flag repeated, a date-time in ISO 8601, an object as JSON)."""
    for name, field in MemoryFilters.model_fields.items():
        flag, dest = filter_flag(name)
        kind = filter_kind(name)
        if kind == "list":
            (item,) = get_args(next(a for a in get_args(field.annotation) if a is not type(None)))
            choices = get_args(item) if get_origin(item) is Literal else None
            parser.add_argument(
                flag, dest=dest, action="append", choices=choices, help=f"{field.description} (repeatable)"
            )
        else:
            parser.add_argument(flag, dest=dest, type=parse_time if kind == "time" else str, help=field.description)


def filters_of(args: argparse.Namespace) -> MemoryFilters | None:
    """The filters of `recall` and `list`, from the flags :func:`add_filter_arguments` adds."""
    raw: dict[str, Any] = {}
    for name in MemoryFilters.model_fields:
        flag, dest = filter_flag(name)
        value = getattr(args, dest, None)
        if value is None or value == []:
            continue
        raw[name] = _json_arg(value, flag.removeprefix("--")) if filter_kind(name) == "object" else value
    if not raw:
        return None
    try:
        return MemoryFilters.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInput(describe_errors(exc), field=str(exc.errors()[0]["loc"][0])) from exc


def _expiry(value: str) -> dt.datetime | None:
    if value.lower() in ("never", "null", "none"):
        return None
    try:
        return parse_time(value)
    except argparse.ArgumentTypeError as exc:
        raise InvalidInput(str(exc), field="expires_at") from exc


def cmd_get(service: Memory, args: argparse.Namespace) -> int:
    emit(service.get(args.id, user_id=args.user))
    return EXIT_OK


def cmd_pending(service: Memory, args: argparse.Namespace) -> int:
    for held in service.pending(user_id=args.user, project_id=args.project):
        emit(held)
    return EXIT_OK


def cmd_users(service: Memory, args: argparse.Namespace) -> int:
    for user in service.admin.users(limit=args.limit):
        emit(user)
    return EXIT_OK


def cmd_review(service: Memory, args: argparse.Namespace) -> int:
    emit(service.review(args.id, args.decision, user_id=args.user, source=args.source))
    return EXIT_OK


def cmd_update(service: Memory, args: argparse.Namespace) -> int:
    raw: dict[str, Any] = {}
    if args.content is not None:
        raw["content"] = args.content
    if args.category is not None:
        raw["category"] = args.category
    if args.metadata is not None:
        raw["metadata"] = _json_arg(args.metadata, "metadata")
    if args.expires_at is not None:
        raw["expires_at"] = _expiry(args.expires_at)
    if args.evergreen is not None:
        raw["is_evergreen"] = args.evergreen
    if not raw:
        raise InvalidInput("nothing to change: give --content, --category, --metadata, --expires-at or --evergreen")
    if args.typo_fix:
        raw["typo_fix"] = True
    try:
        changes = MemoryChanges.model_validate(raw)
    except ValidationError as exc:
        raise InvalidInput(describe_errors(exc), field=str(exc.errors()[0]["loc"][0])) from exc
    emit(service.update(args.id, changes, user_id=args.user, source=args.source))
    return EXIT_OK


def cmd_export(service: Memory, args: argparse.Namespace) -> int:
    out = Path(args.out).open("w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115 - closed below
    count, cursor = 0, None
    try:
        while True:
            page = service.export(
                user_id=args.user, history=args.history, limit=MAX_PAGE, cursor=cursor, as_of=args.as_of
            )
            for line in page.lines:
                out.write(line.model_dump_json(exclude_none=True) + "\n")
            count += len(page.lines)
            cursor = page.next_cursor
            if cursor is None:
                break
    finally:
        if out is not sys.stdout:
            out.close()
    if args.out:
        print(f"rushmem: exported {count} memories of {args.user} to {args.out}", file=sys.stderr)
    return EXIT_OK


def _messages(path: str) -> list[tuple[int, str]]:
    """A file holding one JSON message (possibly over several lines), or JSON Lines of them."""
    # Bytes that are not UTF-8 are kept as lone surrogates: the message holding them is refused
    # alone (no text field takes one), not the whole file.
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    stripped = text.strip()
    if stripped.startswith("{") and "\n" in stripped:
        try:
            json.loads(stripped)
        except ValueError:
            pass  # JSON Lines
        else:
            return [(1, stripped)]
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def cmd_ingest(service: Memory, args: argparse.Namespace) -> int:
    """Each message as IngestFunction takes it from the queue: one outcome line per message."""
    failed = 0
    for number, text in _messages(args.file):
        try:
            message = ConversationEnded.model_validate_json(text)
        except ValidationError as exc:
            failed += 1
            emit({"line": number, "error": describe_errors(exc, "message")})
            continue
        emit(service.ingest_conversation(message))
    return EXIT_ERROR if failed else EXIT_OK
