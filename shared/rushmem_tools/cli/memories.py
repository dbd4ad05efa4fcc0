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
