"""The [RUSH_MEMORY] block that goes into the agent's system prompt."""

from __future__ import annotations

import re
from collections.abc import Iterable

BLOCK_START = "[RUSH_MEMORY]"
BLOCK_END = "[/RUSH_MEMORY]"
BLOCK_TITLE = "Relevant memories:"

# Any spelling of a block marker: brackets, optional slash, spaces, case.
_MARKER = re.compile(r"\[\s*/?\s*rush[\s_-]*memory\s*\]", re.IGNORECASE)
_WHITESPACE = re.compile(r"\s+")  # includes \n, \r, \u2028 and friends


def clean_memory_line(content: str, max_chars: int) -> str:
    """One safe line: whitespace collapsed, block markers defused, length capped."""
    line = _WHITESPACE.sub(" ", content).strip()
    line = _MARKER.sub(lambda m: "(" + m.group(0)[1:-1].strip() + ")", line)
    if len(line) > max_chars:
        line = line[: max_chars - 1].rstrip() + "…"
    return line


def build_memory_block(contents: Iterable[str], *, max_chars: int = 500) -> str:
    """The article's format; an empty string when there is nothing to say.

    [RUSH_MEMORY]
    Relevant memories:
    1. <content>
    [/RUSH_MEMORY]
    """
    lines = [clean_memory_line(c, max_chars) for c in contents]
    lines = [line for line in lines if line]
    if not lines:
        return ""
    numbered = [f"{i}. {line}" for i, line in enumerate(lines, start=1)]
    return "\n".join([BLOCK_START, BLOCK_TITLE, *numbered, BLOCK_END])
