"""Stale memories in recall: a memory that follows from one since superseded or deleted (its
``depends_on``, marked by the store when that happened) is left out of a current answer, and the
block says in one line that nothing current answers when what ranked best no longer holds.

Left out rather than shown as "may no longer hold": the block is read by a model that answers from
it, and a marked stale value is still a value it may give (the old city's gym as the user's gym);
leaving it out costs nothing a user asked for, explain still names it (outcome "stale"), and the
block says in one line that what ranked among the answer no longer holds (MEME's Absence). An
include_inactive read, which asks for what no longer holds too, keeps it with the mark. No I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from rushmem.recall.block import BLOCK_END, BLOCK_GUARD, BLOCK_START, BLOCK_TITLE
from rushmem.records import Candidate
from rushmem_contract.models import CandidateOutcome

# The one line of a block whose best candidates no longer hold (MEME's Absence: say "I no longer
# know" rather than give the stale value).
ABSENCE_LINE = "No current memory answers this; earlier values no longer hold."


def is_stale(candidate: Candidate, at: dt.datetime) -> bool:
    """Whether a memory it depends on had been superseded or deleted by ``at``."""
    return candidate.stale_at is not None and candidate.stale_at <= at


def stale_reason(candidate: Candidate) -> str:
    """Why a memory is stale, as explain says it."""
    return f"stale: depends on {candidate.stale_because} which was {candidate.stale_reason or 'superseded'}"


def stale_mark(candidate: Candidate) -> str:
    """What the block says of a stale memory an include_inactive read keeps."""
    when = f" on {candidate.stale_at:%Y-%m-%d}" if candidate.stale_at is not None else ""
    return f"may no longer hold: what it follows from changed{when}"


# The line of a block that keeps current memories while stale ones ranked among them (left out).
STALE_NOTE = (
    "Some earlier memories relevant to this no longer hold (what they followed from changed) and were left out."
)


def leave_out_stale(
    ranked: Sequence[tuple[Candidate, float]],
    dropped: Mapping[int, tuple[CandidateOutcome, str]],
    *,
    at: dt.datetime,
    limit: int,
) -> tuple[dict[int, tuple[CandidateOutcome, str]], str | None]:
    """The answer's places (0 = first) to leave out: the stale ones, and the current ones past
    ``limit`` (ranking was asked for one more place per stale candidate, so that leaving them out
    does not shorten the answer); and the block's line about them: :data:`ABSENCE_LINE` when a
    stale memory would have been in the answer and nothing current is, :data:`STALE_NOTE` when
    current memories are kept beside it, None when no stale memory would have been in it.

    Scores cannot tell "a current memory answers this" from "a current memory is near it" (with
    all-MiniLM-L6-v2 a stale commute scored 0.535 and the new home city 0.515 for "How does the user
    get to work?", while a stale parking spot outscored the new car for "What car does the user
    have?"): so the line says what is certain, that what ranked among the answer no longer holds."""
    out = dict(dropped)
    kept = 0
    stale_in_answer = False
    for place, (candidate, _) in enumerate(ranked):
        if is_stale(candidate, at):
            # In the answer had it held: within the first `limit` places not cut for relevance.
            stale_in_answer = stale_in_answer or (place not in dropped and kept < limit)
            out[place] = ("stale", stale_reason(candidate))
        elif place not in out:
            if kept >= limit:
                out[place] = ("past_limit", f"past the limit of {limit} once the stale memories were left out")
            else:
                kept += 1
    if not stale_in_answer:
        return out, None
    return out, (ABSENCE_LINE if kept == 0 else STALE_NOTE)


def absence_block(*, guard: bool = True) -> str:
    """The block when nothing current answers: the frame and the one line."""
    return "\n".join([BLOCK_START, *([BLOCK_GUARD] if guard else []), ABSENCE_LINE, BLOCK_END])


def with_note(block: str, note: str) -> str:
    """A block of current memories with the line about the stale ones left out, before the list."""
    return block.replace(f"\n{BLOCK_TITLE}\n", f"\n{note}\n{BLOCK_TITLE}\n", 1)
