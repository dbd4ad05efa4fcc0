"""Consolidation through review (RUSHMEM_REVIEW_WRITES) on the real embedded PostgreSQL: with review
on, a run proposes its merges and retirements instead of making them; they wait in the pending
list with the before and after, at every door; an approval applies the change (once the memories
are still as proposed, else 409), a rejection leaves them as they are and the pair is never
proposed again. With review off, a run merges and supersedes as before."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import anyio
import psycopg
import pytest

from rushmem.config import Settings
from rushmem.ingest.consolidation import ConsolidationReport
from rushmem.service import Memory
from rushmem_client import MemoryClient
from rushmem_contract.errors import Conflict, NotFound
from rushmem_contract.models import ImportLine, PendingMemory
from rushmem_tools.cli import main
from tests.integration.test_mcp import http_client, structured
from tests.support.recall import body_of, invoke, serving, with_request

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
THRESHOLD = 0.7  # as tests/integration/test_consolidation.py: the hash embedder's close pairs
# Equal once normalized (the quotes), yet two rows: a merge.
SAME = ("The user's editor is Vim", "The user\u2019s editor is Vim")
# One slot, two values, a day apart: the older is retired, superseded by the newer.
AGES = ("The user is 31 years old", "The user is 32 years old")


def load(service: Memory, user: str, *texts: str, days: int = 0) -> list[Any]:
    """Memories as an import stores them (near duplicates kept), one day apart, oldest first."""
    lines = [
        ImportLine(user_id=user, content=t, created_at=T0 + dt.timedelta(days=days + i)) for i, t in enumerate(texts)
    ]
    return service.import_(lines).ids


def consolidate(database_url: str) -> ConsolidationReport:
    """A run as the stack's scheduled task makes it: the owner's connection (the maintenance role),
    review on; the decisions go through the test's backend."""
    owner = Settings(database_url=database_url, embedding_provider="hash", review_writes=True)
    with Memory(owner) as service:
        return service.admin.consolidate(threshold=THRESHOLD, restart=True)


def proposals(service: Memory, user: str = "u1") -> list[PendingMemory]:
    return [p for p in service.pending(user_id=user).memories if p.kind != "write"]


def live(service: Memory, user: str = "u1") -> set[Any]:
    return {m.id for m in service.list(user_id=user).memories}


@pytest.mark.both_backends
def test_with_review_on_a_run_proposes_and_an_approval_applies(settings: Settings, database_url: str) -> None:
    with Memory(settings, review_writes=True) as service:
        keep, same = load(service, "u1", *SAME)
        old, new = load(service, "u1", *AGES, days=5)
        report = consolidate(database_url)
        assert (report.merged, report.superseded, report.proposed) == (0, 0, 2)
        assert "2 proposed for review" in report.summary()
        assert live(service) == {keep, same, old, new}  # nothing changed yet

        merge, retire = proposals(service)
        assert (merge.kind, merge.reasons, merge.source) == ("merge", ["consolidation:same_fact"], "consolidate")
        assert merge.content == f'Merge "{SAME[1]}" into "{SAME[0]}"'
        assert merge.proposal is not None and merge.proposal.still_applies
        assert (merge.proposal.memory.id, merge.proposal.kept.id) == (same, keep)
        assert (merge.proposal.memory.content, merge.proposal.kept.content) == (SAME[1], SAME[0])
        assert merge.write_id == report.write_id
        assert retire.kind == "retire" and retire.reasons == ["consolidation:newer_value"]
        assert retire.content == f'Retire "{AGES[0]}", superseded by "{AGES[1]}"'
        assert retire.proposal is not None and (retire.proposal.memory.id, retire.proposal.kept.id) == (old, new)
        # A second run finds the same pairs: waiting already, not proposed twice.
        assert consolidate(database_url).proposed == 0
        assert [p.id for p in proposals(service)] == [merge.id, retire.id]

        merged = service.review(merge.id, "approve", user_id="u1", source="page")
        assert (merged.decision, merged.memory_id) == ("approve", keep)
        assert service.get(same, user_id="u1").superseded_by == keep
        event = service.history(same, user_id="u1").events[-1]
        assert (event.event, event.related_id, event.source, event.write_id) == (
            "merged", keep, "page", merged.write_id
        )  # fmt: skip
        retired = service.review(retire.id, "approve", user_id="u1")
        assert retired.memory_id == new
        ended = service.get(old, user_id="u1")
        assert ended.superseded_by == new and ended.valid_until == T0 + dt.timedelta(days=6)
        assert service.history(old, user_id="u1").events[-1].event == "superseded"
        assert live(service) == {keep, new} and proposals(service) == []
        # One decision per proposal: a second is a Conflict naming the first.
        with pytest.raises(Conflict, match="already approved") as refused:
            service.review(merge.id, "reject", user_id="u1")
        assert refused.value.field == "decision"
        # Another user can neither see nor decide them.
        with pytest.raises(NotFound):
            service.review(retire.id, "approve", user_id="u2")


def test_a_rejection_leaves_the_memories_and_the_pair_is_not_proposed_again(settings: Settings) -> None:
    with Memory(settings, review_writes=True) as service:
        keep, same = load(service, "u1", *SAME)
        service.admin.consolidate(threshold=THRESHOLD, restart=True)
        (merge,) = proposals(service)
        rejected = service.review(merge.id, "reject", user_id="u1")
        assert (rejected.decision, rejected.memory_id) == ("reject", None)
        assert live(service) == {keep, same} and proposals(service) == []
        assert all(e.event != "merged" for e in service.history(same, user_id="u1").events)
        again = service.admin.consolidate(threshold=THRESHOLD, restart=True)
        assert (again.duplicates_found, again.proposed) == (1, 0) and proposals(service) == []
        with pytest.raises(Conflict, match="already rejected"):
            service.review(merge.id, "approve", user_id="u1")
        # A third copy is another pair: proposed, into the oldest.
        (third,) = load(service, "u1", "The user\u2018s editor is Vim", days=3)
        service.admin.consolidate(threshold=THRESHOLD, restart=True)
        assert [(p.proposal.memory.id, p.proposal.kept.id) for p in proposals(service) if p.proposal] == [(third, keep)]


@pytest.mark.both_backends
def test_an_approval_of_memories_changed_since_is_refused_and_withdraws_it(
    settings: Settings, database_url: str
) -> None:
    with Memory(settings, review_writes=True) as service:
        keep, same = load(service, "u1", *SAME)
        old, new = load(service, "u1", *AGES, days=5)
        consolidate(database_url)
        merge, retire = proposals(service)
        service.update(keep, "The user's editor is Neovim", user_id="u1")  # edited after the proposal
        (listed,) = [p for p in proposals(service) if p.id == merge.id]
        assert listed.proposal is not None and not listed.proposal.still_applies
        with pytest.raises(Conflict, match="changed since") as refused:
            service.review(merge.id, "approve", user_id="u1")
        assert refused.value.field == "decision"
        assert service.get(same, user_id="u1").superseded_by is None  # nothing merged
        assert [p.id for p in proposals(service)] == [retire.id]  # withdrawn
        with pytest.raises(Conflict, match="already withdrawn"):
            service.review(merge.id, "approve", user_id="u1")
        # A memory deleted since takes its proposals with it (they hold its id, never its text).
        service.delete(old, user_id="u1")
        assert proposals(service) == []
        with pytest.raises(NotFound):
            service.review(retire.id, "approve", user_id="u1")
        assert new in live(service)


def test_with_review_off_a_run_merges_and_supersedes_as_before(settings: Settings) -> None:
    with Memory(settings) as service:
        keep, same = load(service, "u1", *SAME)
        old, new = load(service, "u1", *AGES, days=5)
        report = service.admin.consolidate(threshold=THRESHOLD, restart=True)
        assert (report.merged, report.superseded, report.proposed) == (1, 1, 0)
        assert live(service) == {keep, new} and service.pending(user_id="u1").memories == []
        assert (service.get(same, user_id="u1").superseded_by, service.get(old, user_id="u1").superseded_by) == (
            keep, new
        )  # fmt: skip


def test_forgetting_a_user_removes_their_proposals(settings: Settings, database_url: str) -> None:
    with Memory(settings, review_writes=True) as service:
        load(service, "u1", *SAME)
        service.admin.consolidate(threshold=THRESHOLD, restart=True)
        assert len(proposals(service)) == 1
        # The operator's user list counts it as waiting.
        assert [(u.user_id, u.pending) for u in service.users().users] == [("u1", 1)]
        service.forget_user("u1", requested_by="test")
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM consolidation_proposals").fetchone() == (0,)


def test_a_held_write_is_listed_with_its_hidden_characters_shown(settings: Settings, database_url: str) -> None:
    with Memory(settings, review_writes=True, untrusted_sources="mcp") as service:
        (held,) = service.add(["Prefers pnpm"], user_id="u1", source="mcp").pending
        with psycopg.connect(database_url) as conn:  # as a row held before the door normalized text
            conn.execute("UPDATE pending_memories SET content = %s WHERE id = %s", ["Prefers\u2060 pn\u00adpm", held])
        assert [p.content for p in service.pending(user_id="u1").memories] == ["Prefers<U+2060> pn<U+00AD>pm"]


# A fact stored before text was normalized at the door, with hidden characters: a zero-width space
# and a right-to-left override (what a reviewer would otherwise not see).
HIDDEN = "The user's editor is V\u200bim\u202e"
SHOWN = "The user's editor is V<U+200B>im<U+202E>"


def test_the_pending_list_shows_hidden_characters_at_every_door(
    lambda_env: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RUSHMEM_REVIEW_WRITES", "true")
    service = Memory()
    keep, same = load(service, "u1", *SAME)
    assert service.admin.consolidate(threshold=THRESHOLD, restart=True).proposed == 1
    # As a row stored before the door normalized text (its hash, the fact as proposed, unchanged).
    with psycopg.connect(lambda_env) as conn:
        conn.execute("UPDATE user_memories SET content = %s WHERE id = %s", [HIDDEN, same])
    expected = f'Merge "{SHOWN}" into "{SAME[0]}"'

    (by_python,) = service.pending(user_id="u1").memories
    assert by_python.content == expected and by_python.proposal is not None
    assert by_python.proposal.memory.content == SHOWN

    listed = body_of(invoke(with_request("http-recall-iam.json", "GET", "/memories/pending", {"user_id": "u1"})))
    (by_http,) = listed["memories"]
    assert (by_http["content"], by_http["kind"], by_http["proposal"]["memory"]["content"]) == (
        expected, "merge", SHOWN
    )  # fmt: skip

    assert main(["pending", "--user", "u1"], settings=service.settings) == 0
    (by_cli,) = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert by_cli["content"] == expected and by_cli["proposal"]["kept"]["id"] == str(keep)

    async def mcp() -> Any:
        async with http_client(served_url, x_memory_user="u1") as client:
            return structured(await client.call_tool("pending_memories", {}))

    with serving() as served_url:
        (by_mcp,) = anyio.run(mcp)["memories"]
        assert by_mcp["content"] == expected and by_mcp["kind"] == "merge"
        with MemoryClient(served_url) as client:
            (by_client,) = client.pending(user_id="u1").memories
            assert by_client.content == expected and by_client.proposal == by_python.proposal
            # Decided like a held write, through the client.
            assert client.review(by_client.id, "approve", user_id="u1").memory_id == keep
    assert service.get(same, user_id="u1").superseded_by == keep
    service.close()
