"""Facts that follow from other facts (issue 45), on the real embedded PostgreSQL: a memory names
what it depends on; when that is superseded or deleted the dependent goes stale in the same
transaction, recall leaves it out (explain says why) and says when nothing current answers; the same
fact stated again is current again; export and import keep the links."""

from __future__ import annotations

import uuid

import pytest

from rushmem.config import Settings
from rushmem.recall.stale import ABSENCE_LINE, STALE_NOTE
from rushmem.service import Memory
from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import ChatMessage, ConversationEnded, NewMemory

USER = "mover"
BERLIN = "The user lives in Berlin."
GYM = "The user's gym is the climbing hall in Berlin Kreuzberg."
ZONE = "The user's time zone is Central European Time because they live in Berlin."
LISBON = "The user lives in Lisbon."

pytestmark = pytest.mark.both_backends


def _moved(service: Memory) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID, uuid.UUID]:
    (berlin,) = service.add([BERLIN], user_id=USER).ids
    gym, zone = service.add(
        [NewMemory(content=GYM, depends_on=[berlin]), NewMemory(content=ZONE, depends_on=[berlin])], user_id=USER
    ).ids
    (lisbon,) = service.add([NewMemory(content=LISBON, supersedes=[berlin])], user_id=USER).ids
    return berlin, gym, zone, lisbon


def test_a_move_makes_what_followed_from_the_old_city_stale(service: Memory, settings: Settings) -> None:
    berlin, gym, zone, lisbon = _moved(service)
    record = service.get(gym, user_id=USER)
    assert record.depends_on == [berlin]
    assert record.stale_at is not None and record.stale_because == berlin and record.stale_reason == "superseded"
    assert service.get(lisbon, user_id=USER).stale_at is None
    listed = {m.id: m for m in service.list(user_id=USER).memories}
    assert listed[zone].stale_because == berlin  # list shows the mark too
    # Recall does not present the stale gym as the user's gym: the block says nothing current answers.
    result = service.recall("climbing hall gym in Kreuzberg", user_id=USER, explain=True)
    assert gym not in {m.id for m in result.memories}
    assert "Kreuzberg" not in result.prompt_block
    # The suite runs with the relevance cut off: the one unrelated current memory is kept, and the
    # block says that what ranked above it no longer holds.
    assert STALE_NOTE in result.prompt_block and ABSENCE_LINE not in result.prompt_block
    # With the cut on (the default), nothing current is near: the block is the one line.
    with Memory(settings.model_copy(update={"min_relative_score": 0.6})) as cut:
        absent = cut.recall("climbing hall gym in Kreuzberg", user_id=USER)
    assert absent.memories == [] and ABSENCE_LINE in absent.prompt_block
    assert absent.prompt_block.count("\n") == 3  # the frame, the guard and the one line
    assert result.explanation is not None
    (why,) = [c for c in result.explanation.candidates if c.id == gym]
    assert why.outcome == "stale" and str(berlin) in why.why and "superseded" in why.why
    # A question the current facts answer is answered, without the absence line.
    where = service.recall("Where does the user live?", user_id=USER)
    assert LISBON in where.prompt_block and ABSENCE_LINE not in where.prompt_block
    assert BERLIN not in where.prompt_block
    # Asked for what no longer holds too, the stale memory comes back marked.
    everything = service.recall("Which gym does the user go to in Kreuzberg?", user_id=USER, include_inactive=True)
    assert "Kreuzberg" in everything.prompt_block and "may no longer hold" in everything.prompt_block


def test_deleting_what_a_fact_follows_from_makes_it_stale_and_stating_it_again_makes_it_current(
    service: Memory,
) -> None:
    (berlin,) = service.add([BERLIN], user_id=USER).ids
    (gym,) = service.add([NewMemory(content=GYM, depends_on=[berlin])], user_id=USER).ids
    service.delete(berlin, user_id=USER)
    record = service.get(gym, user_id=USER)
    assert record.stale_reason == "deleted" and record.stale_because == berlin
    # The same fact written again (the write path's same-fact fold) is current again.
    again = service.add([GYM], user_id=USER)
    assert again.ids == [gym]
    assert service.get(gym, user_id=USER).stale_at is None
    assert "Kreuzberg" in service.recall("Which gym does the user go to?", user_id=USER).prompt_block


def test_depends_on_names_only_the_users_current_memories(service: Memory) -> None:
    (theirs,) = service.add(["Someone else lives in Porto."], user_id="other").ids
    with pytest.raises(InvalidInput) as refused:
        service.add([NewMemory(content=GYM, depends_on=[theirs])], user_id=USER)
    assert refused.value.field == "memories[0].depends_on[0]"
    berlin, *_ = _moved(service)
    with pytest.raises(InvalidInput) as old:
        service.add(
            ["The user swims at the Berlin lido.", NewMemory(content="x y z", depends_on=[berlin])], user_id=USER
        )
    assert old.value.field == "memories[1].depends_on[0]" and "superseded" in str(old.value)
    # Nothing of the refused call was stored.
    assert "The user swims at the Berlin lido." not in {m.content for m in service.list(user_id=USER).memories}


def test_export_and_import_keep_the_links_and_the_marks(service: Memory) -> None:
    berlin, gym, _, _ = _moved(service)
    lines = service.export(user_id=USER).lines
    (line,) = [line for line in lines if line.id == gym]
    assert line.depends_on == [berlin] and line.stale_because == berlin and line.stale_reason == "superseded"
    service.forget_user(USER)
    service.import_(lines)
    copied = service.get(gym, user_id=USER)
    assert copied.depends_on == [berlin] and copied.stale_reason == "superseded" and copied.stale_at == line.stale_at


def test_the_rules_extractor_links_a_fact_naming_the_home_city_and_a_move_makes_it_stale(service: Memory) -> None:
    said = "I live in Berlin. My gym is the climbing hall in Berlin Mitte. I prefer TypeScript."
    first = service.ingest_conversation(
        ConversationEnded(user_id=USER, messages=[ChatMessage(role="user", content=said)])
    )
    by_content = {m.content: m for m in service.list(user_id=USER).memories}
    home = by_content["The user lives in Berlin."]
    gym = by_content["The user's gym is the climbing hall in Berlin Mitte."]
    assert first.status == "stored" and gym.depends_on == [home.id]
    assert by_content["The user prefers TypeScript."].depends_on == []
    service.ingest_conversation(
        ConversationEnded(user_id=USER, messages=[ChatMessage(role="user", content="I moved to Lisbon last week.")])
    )
    after = service.get(gym.id, user_id=USER)
    assert after.stale_because == home.id and after.stale_reason == "superseded"


def test_an_edit_to_a_new_value_makes_dependents_stale_and_a_typo_fix_does_not(service: Memory) -> None:
    (berlin,) = service.add([BERLIN], user_id=USER).ids
    (gym,) = service.add([NewMemory(content=GYM, depends_on=[berlin])], user_id=USER).ids
    service.update(berlin, user_id=USER, content="The user lives in Berlin Mitte.", typo_fix=True)
    assert service.get(gym, user_id=USER).stale_at is None
    service.update(berlin, user_id=USER, content="The user lives in Hamburg.")
    record = service.get(gym, user_id=USER)
    assert record.stale_because == berlin and record.stale_reason == "superseded"
