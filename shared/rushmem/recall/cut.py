"""What of a ranked answer reaches the agent: the relevance cut, after ranking. No I/O.

Ranking fills the limit; the cut then leaves out what scores far below the best memory of this
query (``min_relative_score``, a share of the best score: scores are on one scale within a query,
not across queries or embedders) or below an absolute floor (``min_score``). The share was chosen
on the LoCoMo development split: docs/recall-quality.md, "The relevance cut".
"""

from __future__ import annotations

from collections.abc import Sequence

from rushmem_contract.models import CandidateOutcome


def relevance_cut(
    scores: Sequence[float], *, min_score: float, min_relative_score: float
) -> dict[int, tuple[CandidateOutcome, str]]:
    """The answer's places (0 = first) the cut leaves out, each with its outcome and why."""
    if not scores:
        return {}
    best = max(scores)
    bar = min_relative_score * best if best > 0 else 0.0
    out: dict[int, tuple[CandidateOutcome, str]] = {}
    for place, score in enumerate(scores):
        if min_score > 0 and score < min_score:
            out[place] = ("below_min_score", f"its score {score:.4f} is below the minimum score {min_score:g}")
        elif min_relative_score > 0 and score < bar:
            out[place] = (
                "below_relative_score",
                f"its score {score:.4f} is below {min_relative_score:g} x the best score {best:.4f}",
            )
    return out
