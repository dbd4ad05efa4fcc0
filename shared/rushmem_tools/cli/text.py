"""What `list`, `recall` and `config` print for a person at a terminal (JSON when piped or with ``--json``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from typing import IO

from rushmem_contract.models import MemoryRecord, RecallExplanation, RecallResult


def for_humans(args: argparse.Namespace, out: IO[str] | None = None) -> bool:
    """Text for a person: stdout is a terminal and ``--json`` was not given (scripts keep JSON Lines)."""
    out = out or sys.stdout
    return not getattr(args, "json", False) and out.isatty()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def memory_line(memory: MemoryRecord) -> str:
    """id, day, category and content of one memory: the id is what `get`, `update` and `forget` take."""
    marks = [mark for mark, on in (("evergreen", memory.is_evergreen), ("superseded", memory.superseded_by)) if on]
    flags = f"  ({', '.join(marks)})" if marks else ""
    project = f"  [{memory.project_id}]" if memory.project_id else ""
    return (
        f"{memory.id}  {memory.created_at:%Y-%m-%d %H:%M}  {memory.category:<10}  "
        f"{_one_line(memory.content)}{project}{flags}"
    )


def write_memories(memories: Iterable[MemoryRecord], out: IO[str], user_id: str) -> int:
    count = 0
    for memory in memories:
        out.write(memory_line(memory) + "\n")
        count += 1
    out.write(f"{count} memories of {user_id}, newest first\n" if count else f"no memories of {user_id}\n")
    return count


def write_recall(result: RecallResult, out: IO[str]) -> None:
    """The memories with their scores, then the block an agent puts in its system prompt; with an
    explanation, every candidate's signals and outcome after them."""
    if not result.memories:
        out.write("nothing recalled\n")
    else:
        out.write(f"{'score':>6}  {'category':<10}  memory\n")
        for memory in result.memories:
            out.write(f"{memory.score:6.3f}  {memory.category:<10}  {_one_line(memory.content)}\n")
        out.write("\n" + result.prompt_block + "\n")
    if result.explanation is not None:
        _write_explanation(result.explanation, out)


def _write_explanation(explanation: RecallExplanation, out: IO[str]) -> None:
    out.write(f"\nwhy (evaluated at {explanation.now.isoformat()}")
    out.write(f", as of {explanation.as_of.isoformat()})\n" if explanation.as_of else ")\n")
    out.write(
        f"{'score':>6}  {'vector':>6}  {'text':>5}  {'decay':>5}  {'mmr':>5}  {'rerank':>6}  outcome          memory\n"
    )
    for c in explanation.candidates:
        s = c.signals
        mmr = "" if s.mmr_penalty is None else f"{s.mmr_penalty:.3f}"
        rerank = "" if s.reranker_score is None else f"{s.reranker_score:.3f}"
        date = " [date]" if s.date_window else ""
        out.write(
            f"{c.score:6.3f}  {s.vector_similarity:6.3f}  {s.text_rank:5.2f}  {s.decay:5.3f}  {mmr:>5}  {rerank:>6}  "
            f"{c.outcome:<15}  {_one_line(c.content)}{date}\n"
        )
    for n in explanation.named:
        out.write(f"{n.id}  {n.outcome}: {n.why}\n")


def write_settings(values: Mapping[str, object], defaults: Mapping[str, object], out: IO[str]) -> None:
    """One setting a line; ``*`` marks those that differ from their default (set in the environment)."""
    width = max(len(name) for name in values)
    for name, value in values.items():
        shown = "unset" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        mark = "*" if value != defaults.get(name) else " "
        out.write(f"{mark} {name:<{width}}  {shown}\n")
    out.write("(* differs from the default; secrets masked)\n")
