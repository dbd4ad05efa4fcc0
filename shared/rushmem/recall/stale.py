"""Stale memories in recall: a memory that follows from one since superseded or deleted (its
``depends_on``, marked by the store when that happened) is left out of a current answer, and the
block says in one line that nothing current answers when what ranked best no longer holds.

Left out rather than shown as "may no longer hold": the block is read by a model that answers from
it, and a marked stale value is still a value it may give (the old city's gym as the user's gym);
leaving it out costs nothing a user asked for, and explain still names it (outcome "stale").
An include_inactive read, which asks for what no longer holds too, keeps it with the mark. No I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from rushmem.recall.block import BLOCK_END, BLOCK_GUARD, BLOCK_START
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


# A current memory answers what a stale one was recalled for when it scores at least this share of
# the best stale memory's score: the relevance cut's default share (docs/recall-quality.md, "The
# relevance cut"), applied here whatever RUSHMEM_MIN_RELATIVE_SCORE says, since filling the limit
# (the cut off) must not turn "I no longer know" into unrelated memories.
ANSWERS_SHARE = 0.6


def leave_out_stale(
    ranked: Sequence[tuple[Candidate, float]],
    dropped: Mapping[int, tuple[CandidateOutcome, str]],
    *,
    at: dt.datetime,
    limit: int,
) -> tuple[dict[int, tuple[CandidateOutcome, str]], bool]:
    """The answer's places (0 = first) to leave out: the stale ones, and the current ones past
    ``limit`` (ranking was asked for one more place per stale candidate, so that leaving them out
    does not shorten the answer); and whether the block is an absence: the best-scoring candidate is
    stale and no current one kept scores near it (then the block holds only :data:`ABSENCE_LINE`)."""
    out = dict(dropped)
    kept: list[int] = []
    for place, (candidate, _) in enumerate(ranked):
        if is_stale(candidate, at):
            out[place] = ("stale", stale_reason(candidate))
        elif place not in out:
            if len(kept) >= limit:
                out[place] = ("past_limit", f"past the limit of {limit} once the stale memories were left out")
            else:
                kept.append(place)
    best = max(range(len(ranked)), key=lambda p: ranked[p][1], default=None)
    if best is None or not is_stale(ranked[best][0], at):
        return out, False
    bar = ANSWERS_SHARE * ranked[best][1]
    if any(ranked[p][1] >= bar for p in kept):
        return out, False
    why = (
        f"the best match ({stale_reason(ranked[best][0])}) no longer holds, and this scores below "
        f"{ANSWERS_SHARE:g} x its score: the block says nothing current answers"
    )
    for place in kept:
        out[place] = ("below_relative_score", why)
    return out, True


def absence_block(*, guard: bool = True) -> str:
    """The block when nothing current answers: the frame and the one line."""
    return "\n".join([BLOCK_START, *([BLOCK_GUARD] if guard else []), ABSENCE_LINE, BLOCK_END])
