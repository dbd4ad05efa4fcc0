"""Consolidation (Memory.admin.consolidate, `rushmem consolidate`, MigrateFunction's scheduled
task) on the real embedded PostgreSQL: true duplicates that slipped in are merged, with the merge
in their history; different facts that look alike are left alone; runs resume where they stopped."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem.store.memories.consolidation import CHECKPOINT_KEY
from rushmem_contract.models import ImportLine
from rushmem_tools.cli import main
from rushmem_tools.local import runtime as lambda_local
from tests.support.recall import TEMPLATE

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
# Pairs the hash embedder scores at least 0.70 alike (see the similarities asserted below).
THRESHOLD = 0.7
# Equal once normalized (the quotes), yet different rows: their content hashes differ.
SAME = ("The user's editor is Vim", "The user\u2019s editor is Vim")
# Close in meaning, every anchor the same.
CLOSE = ("The user prefers TypeScript for web work", "The user prefers TypeScript for web work too")
DIFFERENT = [
    ("The user is 31 years old", "The user is 32 years old"),
    ("Anna owes Ben 50 euros", "Ben owes Anna 50 euros"),
]


def load(service: Memory, user: str, *texts: str, project_id: str | None = None) -> list[Any]:
    """Memories as an import stores them (near duplicates kept), one day apart, oldest first."""
    lines = [
        ImportLine(user_id=user, content=t, project_id=project_id, created_at=T0 + dt.timedelta(days=i))
        for i, t in enumerate(texts)
    ]
    return service.import_(lines).ids


def test_true_duplicates_are_merged_into_the_oldest_and_lookalike_facts_are_not(service: Memory) -> None:
    for first, second in [CLOSE, *DIFFERENT]:
        assert service.admin.similarities(first, [second])[0] >= THRESHOLD
    keep, same = load(service, "u1", *SAME)
    kept_close, close = load(service, "u1", *CLOSE)
    different = [load(service, "u1", a, b) for a, b in DIFFERENT]
    elsewhere = load(service, "u1", SAME[1], project_id="web")  # another scope: never merged across
    other_user = load(service, "u2", *SAME)

    report = service.admin.consolidate(threshold=THRESHOLD, restart=True)
    assert (report.users, report.duplicates_found, report.merged, report.done) == (2, 3, 3, True)
    live = {m.id for m in service.list(user_id="u1").memories}
    assert {keep, kept_close} <= live and same not in live and close not in live
    # Different facts are never merged: a role swap stays two memories; an age and its update are
    # no duplicates either (the older is superseded by the newer, see the test below).
    assert set(different[1]) <= live and set(elsewhere) <= live
    assert all(e.event != "merged" for ids in different for i in ids for e in service.history(i, user_id="u1").events)
    assert {m.id for m in service.list(user_id="u2").memories} == {other_user[0]}
    # The merge is in the history, under the run's write id, and points at the kept memory.
    merged = service.history(same, user_id="u1").events[-1]
    assert (merged.event, merged.related_id, merged.source, merged.write_id) == (
        "merged", keep, "consolidate", report.write_id
    )  # fmt: skip
    assert service.get(same, user_id="u1").superseded_by == keep  # still readable, no longer current
    kept = service.get(keep, user_id="u1")
    assert kept.updated_at == T0 + dt.timedelta(days=1)  # as fresh as its latest duplicate
    assert [m.id for m in service.recall("editor Vim", user_id="u1").memories].count(same) == 0
    # Nothing left to do: a second run finds nothing.
    again = service.admin.consolidate(threshold=THRESHOLD)
    assert (again.duplicates_found, again.merged) == (0, 0)


def test_a_run_goes_on_from_the_stored_checkpoint(service: Memory, database_url: str) -> None:
    for user in ("u1", "u2", "u3"):
        load(service, user, *SAME)
    with psycopg.connect(database_url) as conn:  # where an interrupted run stopped: after u1
        conn.execute("UPDATE agent_memory_meta SET value = 'u1' WHERE key = %s", [CHECKPOINT_KEY])
    first = service.admin.consolidate()
    assert (first.users, first.merged, first.done) == (2, 2, True)  # u2 and u3, then round
    assert len(service.list(user_id="u1").memories) == 2
    second = service.admin.consolidate()
    assert (second.users, second.merged) == (3, 1)  # from the first user again: u1's pair now
    stopped = service.admin.consolidate(max_seconds=0)
    assert (stopped.done, stopped.users, stopped.cursor) == (False, 0, "")


def test_the_cli_and_the_scheduled_task_consolidate(
    capsys: pytest.CaptureFixture[str], settings: Settings, service: Memory, lambda_env: str
) -> None:
    load(service, "u1", *SAME)
    assert main(["consolidate", "--restart"], settings=settings) == 0
    out, err = capsys.readouterr()
    report = json.loads(out.strip().splitlines()[-1])
    assert (report["merged"], report["done"]) == (1, True) and "1 merged" in err
    load(service, "u2", *SAME)
    answer = lambda_local.invoke(TEMPLATE, "MigrateFunction", {"task": "consolidate"})
    assert isinstance(answer, dict)
    assert (answer["users"], answer["merged"], answer["done"]) == (2, 1, True)


def test_a_stale_fact_beside_its_update_is_superseded_and_other_facts_are_not(service: Memory) -> None:
    """An import keeps both "31" and "32" current: consolidation supersedes the older by the newer
    with the write path's same-attribute rule (valid time closed, in the history under the run's
    write id); events, role swaps and many-valued relations stay."""
    age31, age32, age33 = load(service, "u1", "The user is 31 years old", "The user is 32 years old",
                               "The user is 33 years old")  # fmt: skip
    kept = load(service, "u1", "The user visited Paris", "The user visited Rome", "Anna employs Ben",
                "Ben employs Anna", "Zane is the parent of Enzo", "Zane is the parent of Mia")  # fmt: skip

    report = service.admin.consolidate(restart=True)
    assert (report.superseded, report.merged) == (2, 0)
    live = {m.id for m in service.list(user_id="u1").memories}
    assert age33 in live and age31 not in live and age32 not in live and set(kept) <= live
    # A chain: 31 -> 32 -> 33, each closed when the next became true.
    old, middle = service.get(age31, user_id="u1"), service.get(age32, user_id="u1")
    assert (old.superseded_by, middle.superseded_by) == (age32, age33)
    assert old.valid_until == middle.valid_from == T0 + dt.timedelta(days=1)
    event = service.history(age31, user_id="u1").events[-1]
    assert (event.event, event.related_id, event.write_id) == ("superseded", age32, report.write_id)
    then = service.recall("How old is the user?", user_id="u1", as_of=T0 + dt.timedelta(hours=12))
    assert "The user is 31 years old" in [m.content for m in then.memories]
    assert service.admin.consolidate(restart=True).superseded == 0
