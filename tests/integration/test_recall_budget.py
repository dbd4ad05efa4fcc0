"""What reaches the agent's prompt: the relevance cut (on by default) and a recall's token budget."""

from __future__ import annotations

from rushmem.config import Settings
from rushmem.recall.block import count_tokens
from rushmem.service import Memory
from rushmem_contract.models import NewMemory

WORK = [
    "The user's product is an SVG editor with live preview and export",
    "Every SVG export must keep the defaultSVG variable in sync",
    "The SVG editor's export dialog offers PNG and SVG formats",
]
PERSONAL = ["The user has a golden retriever named Biscuit", "The user's favourite food is ramen"]


# The suite runs with the cut off (tests/conftest.py); these tests put the default back.
DEFAULT_CUT = Settings.model_fields["min_relative_score"].default


def _store(service: Memory) -> None:
    service.add([NewMemory(content=c) for c in [*WORK, *PERSONAL]], user_id="u1")


def test_by_default_the_block_leaves_out_what_scores_far_below_the_best(settings: Settings) -> None:
    assert DEFAULT_CUT == 0.6
    with Memory(settings.model_copy(update={"min_relative_score": DEFAULT_CUT})) as service:
        _store(service)
        cut = service.recall("SVG editor export", user_id="u1", explain=True)
        with Memory(settings.model_copy(update={"min_relative_score": 0.0})) as filling:
            filled = filling.recall("SVG editor export", user_id="u1")
    # The article's behaviour is one setting away: every memory, the unrelated ones too.
    assert len(filled.memories) == 5 and min(m.score for m in filled.memories) < 0.6 * filled.memories[0].score
    kept = [m.content for m in cut.memories]
    assert kept and set(kept) <= set(WORK) and not any(p in cut.prompt_block for p in PERSONAL)
    assert all(m.score >= 0.6 * cut.memories[0].score for m in cut.memories)
    assert cut.explanation is not None and cut.explanation.min_relative_score == 0.6
    left_out = [c for c in cut.explanation.candidates if c.outcome == "below_relative_score"]
    assert {c.content for c in left_out} >= set(PERSONAL) and all(c.position is None for c in left_out)
    assert cut.block_tokens == count_tokens(cut.prompt_block) > 0


def test_a_token_budget_bounds_the_block_and_the_answer_is_the_block(settings: Settings) -> None:
    fill = settings.model_copy(update={"min_relative_score": 0.0})
    with Memory(fill) as service:
        _store(service)
        whole = service.recall("SVG editor export", user_id="u1")
        budget = whole.block_tokens - 10  # the last memory's line no longer fits
        tight = service.recall("SVG editor export", user_id="u1", max_tokens=budget, explain=True)
        nothing = service.recall("SVG editor export", user_id="u1", max_tokens=20)
    assert whole.block_tokens == count_tokens(whole.prompt_block)
    assert tight.block_tokens == count_tokens(tight.prompt_block) <= budget
    assert 0 < len(tight.memories) < len(whole.memories)
    # The answer's memories are the block's, in its order and best first.
    assert [m.id for m in tight.memories] == [m.id for m in whole.memories if m.content in tight.prompt_block]
    for number, memory in enumerate(tight.memories, start=1):
        assert f"\n{number}. {memory.content}\n" in tight.prompt_block
    assert tight.explanation is not None and tight.explanation.max_tokens == budget
    over = [c for c in tight.explanation.candidates if c.outcome == "over_token_budget"]
    assert over and all(f"budget of {budget} tokens" in c.why for c in over)
    # Smaller than the block's frame: no block, no memories.
    assert nothing.prompt_block == "" and nothing.memories == [] and nothing.block_tokens == 0
