"""`rushmem ingest`: finished conversations from a file (one JSON message, or JSON Lines of many, as
the queue delivers them), each through the dispatcher as POST /conversations runs it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pydantic import ValidationError

from rushmem.service import Memory
from rushmem_contract.kinds import EXIT_ERROR, EXIT_OK
from rushmem_contract.models import ConversationEnded, describe_errors
from rushmem_tools.cli.output import emit


def wrong_file(text: str, path: str, command: str) -> str | None:
    """What a file given to ``command`` (ingest or import) holds when it is another command's input,
    and that command's line: an SQS or API Gateway event (as events/ holds them) is for ``rushmem
    invoke``, a conversation for ``ingest``, a memory line for ``import``. None: nothing recognized."""
    # RecursionError: JSON nested deeper than the parser goes, which no command's input is.
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        first = text.strip().partition("\n")[0]  # JSON Lines: the first line says what they are
        try:
            value = json.loads(first)
        except (ValueError, RecursionError):
            return None
    if command == "import":
        other = other_format(value)
        if other is not None:
            return f"{path} holds {other[1]}: run `rushmem import --format {other[0]} {path}`"
    if not isinstance(value, dict):
        return None
    records = value.get("Records")
    if isinstance(records, list) and records and isinstance(records[0], dict):
        source = records[0].get("eventSource", "an AWS")
        function = "IngestFunction" if source == "aws:sqs" else "FUNCTION"
        return f"{path} is an {source} event (Records): run `rushmem invoke {function} {path}`"
    if "requestContext" in value or "RequestType" in value or "detail-type" in value:
        return (
            f"{path} is a Lambda event: run `rushmem invoke FUNCTION {path}` (events/manifest.json names each file's)"
        )
    if command == "ingest" and "content" in value and "messages" not in value:
        return f"{path} holds memories (import lines): run `rushmem import {path}`"
    if command == "import" and "messages" in value and "content" not in value:
        return f"{path} holds conversations: run `rushmem ingest {path}`"
    return None


def other_format(value: object) -> tuple[str, str] | None:
    """The --format a file (its parsed JSON, or its first line's) is in, and what it holds; None:
    none of them (docs/import-export.md)."""
    first = value[0] if isinstance(value, list) and value else value
    if isinstance(value, dict) and isinstance(value.get("results"), list) and value["results"]:
        first = value["results"][0]
    if not isinstance(first, dict):
        return None
    if "mapping" in first or ("role" in first and "content" in first):
        return "chatgpt", "a chat export"
    if "memory" in first and "content" not in first:
        return "mem0", "mem0's memories"
    if first.get("type") in ("fact", "episode") or first.get("t") in ("fact", "episode"):
        return "oms", "Open Memory Specification grains"
    return None


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
            hint = wrong_file(text, args.file, "ingest")
            emit({"line": number, "error": describe_errors(exc, "message") + (f" ({hint})" if hint else "")})
            if hint and number == 1:
                print(f"rushmem: not a conversation-ended message: {hint}", file=sys.stderr)
            continue
        emit(service.ingest_conversation(message))
    return EXIT_ERROR if failed else EXIT_OK
