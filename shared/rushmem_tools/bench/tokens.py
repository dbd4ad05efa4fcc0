"""`rushmem bench tokens`: prompt tokens of the full history against the [RUSH_MEMORY] block.

For every question of a LoCoMo-format split, the alternative to memory is to put the
whole conversation so far into the prompt. Both are counted with the tokenizer of the
local model (all-MiniLM-L6-v2's WordPiece, uncased): a chat model's tokenizer gives
other absolute numbers, but the ratio between the two is what the saving is about.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rushmem.service import Memory
from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import ImportLine
from rushmem_tools.bench.common import ScratchServer, add_database_arguments, open_service, print_table, say
from rushmem_tools.bench.quality import IMPORT_CHUNK, QualityQuery, default_bench_file, read_lines

_SESSION = re.compile(r"^session_(\d+)$")


def history_text(conversation: dict[str, Any]) -> str:
    """The whole dialogue as a prompt would carry it: each session's date, then 'speaker: text' lines."""
    sessions = sorted(
        (int(m.group(1)), key) for key in conversation if (m := _SESSION.match(key)) and conversation[key]
    )
    lines: list[str] = []
    for number, key in sessions:
        when = conversation.get(f"session_{number}_date_time", "")
        lines.append(f"Session {number} ({when}):" if when else f"Session {number}:")
        for turn in conversation[key]:
            text = turn.get("text", "")
            if turn.get("blip_caption"):  # LoCoMo's shared photos, as their captions
                text = f"{text} [shares a photo: {turn['blip_caption']}]".strip()
            lines.append(f"{turn.get('speaker', '?')}: {text}")
    return "\n".join(lines)


def read_conversations(path: Path) -> dict[str, dict[str, Any]]:
    """sample_id -> conversation, from LoCoMo's conversations JSON."""
    if not path.is_file():
        raise InvalidInput(f"{path} does not exist", field="conversations")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {str(item["sample_id"]): item["conversation"] for item in data}
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(
            f"{path} is not LoCoMo conversations JSON ([{{sample_id, conversation}}, ...]): {exc}",
            field="conversations",
        ) from exc


class TokenCounter:
    """Counts tokens with the local model's tokenizer, line by line (no 512-token model limit applies)."""

    def __init__(self) -> None:
        from rushmem_tools.embedders.local import LocalEmbedder

        self.embedder = LocalEmbedder()

    def count(self, text: str) -> int:
        lines = [line for line in text.split("\n") if line.strip()]
        if not lines:
            return 0
        return sum(self.embedder.count_tokens(lines))


def run(service: Memory, args: argparse.Namespace) -> int:
    conversations_path = (
        Path(args.conversations).expanduser()
        if args.conversations
        else default_bench_file("locomo-dev", "conversations.json")
    )
    folder = conversations_path.parent
    memories_path = Path(args.memories).expanduser() if args.memories else folder / "memories.jsonl"
    queries_path = Path(args.queries).expanduser() if args.queries else folder / "queries.jsonl"
    conversations = read_conversations(conversations_path)
    lines: list[ImportLine] = read_lines(memories_path, ImportLine, "memories")
    queries: list[QualityQuery] = read_lines(queries_path, QualityQuery, "queries")
    missing = sorted({q.user_id for q in queries} - set(conversations))
    if missing:
        raise InvalidInput(f"queries for users without a conversation: {', '.join(missing[:5])}", field="queries")

    counter = TokenCounter()
    history_tokens = {user: counter.count(history_text(c)) for user, c in conversations.items()}
    with ScratchServer.from_args(args) as server:
        bench = open_service(service.settings, server.new_database("tokens"), provider=args.embedder)
        try:
            say(f"importing {len(lines)} memories ({bench.admin.embedder.fingerprint})")
            for start in range(0, len(lines), IMPORT_CHUNK):
                bench.import_(lines[start : start + IMPORT_CHUNK], source="bench")
            vectors = bench.admin.embedder.embed([q.query.strip() or " " for q in queries])
            say(f"recalling {len(queries)} queries (limit {args.limit})")
            blocks = [
                bench.recall(q.query, user_id=q.user_id, limit=args.limit, now=q.now, query_vector=v).prompt_block
                for q, v in zip(queries, vectors, strict=True)
            ]
        finally:
            bench.close()
    block_tokens = [counter.count(b) for b in blocks]
    _report(conversations, queries, history_tokens, block_tokens, conversations_path, args.limit)
    full = sum(history_tokens[q.user_id] for q in queries) / len(queries)
    block = sum(block_tokens) / len(block_tokens)
    saving = 100.0 * (1.0 - block / full) if full else 0.0
    print(f"tokens full_history={full:.0f} memory_block={block:.0f} saving={saving:.1f}%")
    return 0


def _report(
    conversations: dict[str, dict[str, Any]],
    queries: Sequence[QualityQuery],
    history_tokens: dict[str, int],
    block_tokens: Sequence[int],
    path: Path,
    limit: int,
) -> None:
    print(
        f"conversations: {path}; tokens counted with all-MiniLM-L6-v2's tokenizer (WordPiece, uncased); "
        f"block = [RUSH_MEMORY] of the top {limit} recalled memories per question, as of its time"
    )
    rows = []
    for user, conversation in conversations.items():
        mine = [t for q, t in zip(queries, block_tokens, strict=True) if q.user_id == user]
        sessions = sum(1 for key in conversation if _SESSION.match(key) and conversation[key])
        turns = sum(len(conversation[key]) for key in conversation if _SESSION.match(key))
        mean_block = sum(mine) / len(mine) if mine else 0.0
        saving = 100.0 * (1 - mean_block / history_tokens[user]) if history_tokens[user] and mine else 0.0
        rows.append([user, sessions, turns, history_tokens[user], len(mine), f"{mean_block:.0f}", f"{saving:.1f}%"])
    print_table(["conversation", "sessions", "turns", "history tokens", "questions", "block tokens", "saving"], rows)


def register(sub: Any) -> None:
    p = sub.add_parser(
        "tokens",
        help="prompt tokens: the full conversation history against the [RUSH_MEMORY] block",
        description="For each question of a LoCoMo-format split, count the tokens of the whole conversation "
        "history and of the [RUSH_MEMORY] block recall builds instead (local model's tokenizer).",
    )
    p.add_argument(
        "conversations",
        nargs="?",
        help="LoCoMo conversations JSON (default ../shared/bench/locomo-dev/conversations.json)",
    )
    p.add_argument("--memories", help="memories JSON Lines (default: memories.jsonl beside the conversations)")
    p.add_argument("--queries", help="queries JSON Lines (default: queries.jsonl beside the conversations)")
    p.add_argument("--limit", type=int, default=10, help="memories per block (default 10)")
    p.add_argument(
        "--embedder", choices=["local", "hash"], default="local", help="for recall (default local); tokens always local"
    )
    add_database_arguments(p)
    p.set_defaults(func=run)
