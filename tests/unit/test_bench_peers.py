"""`bench peers`' own rows for ours (no I/O; mem0 is not needed)."""

from __future__ import annotations

from rushmem.config import Settings
from rushmem.recall.plan import RecallPlan
from rushmem_tools.bench import peers, quality


def test_the_vector_only_row_is_bench_quality_s_with_every_other_leg_off() -> None:
    # Against mem0 (whose ranking, spaCy absent, is cosine alone) the row must be cosine alone too:
    # a copy of bench quality's options here once kept the date leg and the one-hop bonus on.
    plan = RecallPlan.from_settings(Settings())
    assert plan.date_k > 0 and plan.hop_seeds > 0  # the defaults the row must turn off
    rows = peers.ours_variants(plan)
    vector = rows["ours, vector only"]
    assert vector == next(v.plan for v in quality.variants(plan) if v.name == "vector only")
    assert vector.legs == "vector" and not (vector.decay or vector.mmr or vector.rerank)
    assert (vector.date_k, vector.hop_seeds, vector.date_boost) == (0, 0, 0.0)
    assert rows["ours (default)"] == plan.but(rerank=False)  # as bench quality's default row
