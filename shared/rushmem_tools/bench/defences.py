"""`rushmem bench defences`: every defence a text goes through, on hostile shapes and on ordinary
text of the same size (issue 46).

A defence is what a write or a recall runs on a caller's text: the personal data redaction (one
row per detector: the shapes aimed at it, through the whole redaction step a write runs), the
injection marks, the prompt block's rewriting, the recall-loop guard, normalization and the fact
matcher. Each shape's time is divided by the ordinary text's (the least of ``--repeat`` runs of
each); a defence's ratio is its worst shape's. A defence that is linear in its input whatever its
shape keeps every ratio small; one that reads a text again from each position (a regular
expression that backtracks, a loop over what it already found) shows a ratio that grows with the
size, which the ``growth`` column shows directly: the worst shape at twice the size over the
shape at the size (2 for linear time). No database: pure CPU, on one core, timed in the process's
CPU seconds (on a loaded machine the wall clock mostly measures the other processes).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

from rushmem.ingest import facts
from rushmem.ingest.redaction import Redactor
from rushmem.poison import reasons, strip_memory_blocks
from rushmem.privacy import PiiPolicy
from rushmem.recall.block import defused_text
from rushmem_contract.inputs import visible_text
from rushmem_contract.models import MAX_METADATA_CHARS, NewMemory
from rushmem_tools.bench.common import print_table, say

Shape = Callable[[int], str]


def repeat(unit: str) -> Shape:
    """``unit`` repeated to exactly ``n`` characters."""
    return lambda n: (unit * (n // len(unit) + 1))[:n]


_WORDS = (
    "the user prefers TypeScript for new services and reviews pull requests on Monday mornings; "
    "Alice moved to Lisbon in 2021 and works at Globex as a staff engineer, her team ships 12 releases a year; "
    "the flight from Paris to Berlin leaves at 9:40 and costs 120 euros; all SVG changes sync to defaultSVG. "
)
_ACCENTED = (
    "L'utilisateur préfère le café noir à 8 h, habite à Zürich près de la gare et écrit en Python; "
    "Сергей работает в Москве с 2019 года; 東京の会議は月曜日です。 "
)


def ordinary(n: int) -> str:
    """Prose of ``n`` characters as memories hold it: words, names, a few numbers and dates."""
    return repeat(_WORDS)(n)


def ordinary_with_block(n: int) -> str:
    """Prose of ``n`` characters with a recalled block pasted in (what the recall-loop guard removes)."""
    block = " [RUSH_MEMORY] Relevant memories: 1. the user prefers TypeScript [/RUSH_MEMORY] "
    half = (n - len(block)) // 2
    return ordinary(half) + block + ordinary(n - len(block) - half)


def ordinary_accented(n: int) -> str:
    """Prose of ``n`` characters that is not ASCII (normalization's short cut is for ASCII only)."""
    return repeat(_ACCENTED)(n)


# Shapes aimed at each defence: long runs of digits and separators, partial matches repeated,
# values packed as densely as a field holds them, markers nested and left open.
PII_SHAPES: dict[str, dict[str, Shape]] = {
    "email": {
        "addresses": repeat("a@b.cd "),
        "at signs": repeat("a@"),
        "dotted local part": lambda n: repeat("a.")(n // 2) + "@" + repeat("a.")(n - n // 2 - 1),
        "domain labels": lambda n: "a@" + repeat("a-a.")(n - 2),
    },
    "phone": {
        "35-digit runs, commas": repeat("1" * 35 + ","),
        "digits and spaces": repeat("1 "),
        "bracketed digits": repeat("(1)"),
        "phone numbers": repeat("call +1 415 555 0134 "),
    },
    "payment_card": {
        "card numbers": repeat("4111 1111 1111 1111 "),
        "digit run": repeat("1234567890"),
        "dashed digits": repeat("12-"),
    },
    "bank_account": {
        "IBAN starts": repeat("DE89 "),
        "IBANs": repeat("DE89 3704 0044 0532 0130 00 "),
        "letters and digits": repeat("GB82WEST"),
    },
    "government_id": {
        "SSNs": repeat("123-45-6789 "),
        "SSN prefixes": repeat("123-45-"),
    },
    "credential": {
        "private key openings": repeat("-----BEGIN PRIVATE KEY----- "),
        "nested key markers": repeat("-----BEGIN A PRIVATE KEY-----x-----END B PRIVATE KEY----- "),
        "key ids and secrets": repeat("AKIAABCDEFGHIJKLMNOP wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY "),
        "bearer words": repeat("bearer "),
        "token prefixes": repeat("xoxa-sk-ghp_"),
        "JWT-like": repeat("eyJhbGciOi.eyJzdWIiOi."),
    },
    "ip_address": {
        "addresses": repeat("10.1.2.3 "),
        "dotted digits": repeat("1."),
        "colons": repeat("a:"),
        "double colons": repeat("::"),
    },
}
SHAPES: dict[str, dict[str, Shape]] = {
    **PII_SHAPES,
    "injection": {
        "ignore and a dash run": lambda n: "ignore" + repeat("-")(n - 6),
        "instruction words": repeat("ignore all the previous "),
        "fences": repeat("### begin "),
        "template tokens": repeat("<|"),
        "role words": repeat(". system:"),
        "block markers": repeat("[rush memory "),
    },
    "block": {
        "ignore and a dash run": lambda n: "ignore" + repeat("-")(n - 6),
        "nested markers": repeat("[[RUSH_MEMORY]] "),
        "role tags": repeat("<system "),
        "instructions": repeat("ignore previous instructions "),
        "headings": repeat("## "),
    },
    "strip": {
        "openings": repeat("[RUSH_MEMORY] "),
        "closings": repeat("[/RUSH_MEMORY] "),
        "nested": repeat("[[RUSH_MEMORY][/RUSH_MEMORY]] "),
        "brackets": repeat("[("),
    },
    "normalization": {
        "stacked marks": repeat("e" + "\u0301" * 30),
        "zero-width between letters": repeat("a\u200b"),
        "joiners": repeat("\u0915\u200d"),
        "fillers": repeat("\u3164a"),
    },
    "facts": {
        "dense tokens": repeat("a@"),
        "direction words": repeat("to "),
        "numbers": repeat("1 "),
        "names": repeat("Alice "),
    },
}

_REDACTOR = Redactor(PiiPolicy.parse("redact"))  # every category on: each detector runs


def _redact(text: str) -> object:
    return _REDACTOR.apply([NewMemory.model_construct(content=text, metadata={})])


def _facts(text: str) -> object:
    # Two texts of the same shape, one value apart (the write path compares a fact with its neighbours).
    facts._tokens.cache_clear()
    facts._slots.cache_clear()
    other = text[:-1] + "7"
    return facts.same_fact(text, other), facts.updated_value(text, other)


# What each defence runs on a text, and its ordinary input.
DEFENCES: dict[str, tuple[Callable[[str], object], Shape]] = {
    **dict.fromkeys(PII_SHAPES, (_redact, ordinary)),
    "injection": (reasons, ordinary),
    "block": (defused_text, ordinary),
    "strip": (strip_memory_blocks, ordinary_with_block),
    "normalization": (visible_text, ordinary_accented),
    "facts": (_facts, ordinary),
}


def _seconds(fn: Callable[[str], object], text: str, repeat_: int) -> float:
    best = float("inf")
    for _ in range(repeat_):
        started = time.process_time()  # CPU time: what the defence costs, whatever else the machine runs
        fn(text)
        best = min(best, time.process_time() - started)
    return best


@dataclasses.dataclass
class Row:
    defence: str
    shape: str
    adversarial: float
    ordinary: float
    growth: float = 0.0

    @property
    def ratio(self) -> float:
        return self.adversarial / self.ordinary if self.ordinary > 0 else 0.0


def measure(size: int, repeat_: int) -> list[Row]:
    """Each defence's worst shape (and its growth at twice the size)."""
    worst: list[Row] = []
    for name, (defence, plain) in DEFENCES.items():
        say(f"{name}: {len(SHAPES[name])} shapes")
        base = _seconds(defence, plain(size), repeat_)
        rows = [Row(name, shape, _seconds(defence, make(size), repeat_), base) for shape, make in SHAPES[name].items()]
        row = max(rows, key=lambda r: r.ratio)
        row.growth = _seconds(defence, SHAPES[name][row.shape](2 * size), repeat_) / row.adversarial
        worst.append(row)
    return worst


def run(_service: object, args: argparse.Namespace) -> int:
    load = os.getloadavg()[0]
    rows = measure(args.size, args.repeat)
    print(f"{args.size:,}-character inputs, CPU time, the least of {args.repeat} runs each; load average {load:.2f}")
    print_table(
        ["defence", "worst shape", "adversarial ms", "ordinary ms", "ratio", "growth at 2x size"],
        [
            [r.defence, r.shape, *(f"{v:.2f}" for v in (1000 * r.adversarial, 1000 * r.ordinary, r.ratio, r.growth))]
            for r in rows
        ],
    )
    keys = " ".join(f"{r.defence}_ratio={r.ratio:.2f}" for r in rows)
    print(
        f"defences size={args.size} load={load:.2f} {keys} max_ratio={max(r.ratio for r in rows):.2f} "
        f"max_growth={max(r.growth for r in rows):.2f}"
    )
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "defences",
        help="each defence (detectors, injection marks, block, normalization, fact matcher) on hostile shapes",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    p.add_argument("--size", type=int, default=MAX_METADATA_CHARS, help="characters per input (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=5, help="runs of each input; the least is kept (default: %(default)s)")
    p.set_defaults(func=run)
