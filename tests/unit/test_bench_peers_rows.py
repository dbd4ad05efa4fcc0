"""`bench peers`' own rows for ours (no I/O; mem0 is not needed)."""

from __future__ import annotations

from agent_memory.config import Settings
from agent_memory.recall.ranking import RecallOptions
from agent_memory_tools.bench import peers, quality


def test_the_vector_only_row_is_bench_quality_s_with_every_other_leg_off() -> None:
    # Against mem0 (whose ranking, spaCy absent, is cosine alone) the row must be cosine alone too:
    # a copy of bench quality's options here once kept the date leg and the one-hop bonus on.
    options = RecallOptions.from_settings(Settings())
    assert options.date_k > 0 and options.hop_seeds > 0  # the defaults the row must turn off
    rows = peers.ours_variants(options)
    vector = rows["ours, vector only"]
    assert vector == next(v.options for v in quality.variants(options) if v.name == "vector only")
    assert vector.legs == "vector" and not (vector.decay or vector.mmr or vector.rerank)
    assert (vector.date_k, vector.hop_seeds, vector.entity_k, vector.date_boost) == (0, 0, 0, 0.0)
    assert rows["ours (default)"] == options.but(rerank=False)  # as bench quality's default row
