"""Consolidation's decisions (rushmem.ingest.consolidation.plan_merges), without a database."""

from __future__ import annotations

import datetime as dt
import uuid

import numpy as np
import pytest

from rushmem.ingest.consolidation import NearPair, near_pairs, plan_merges, plan_supersessions
from rushmem.records import LiveMemory

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def memories(*texts: str, project_id: str | None = None) -> list[LiveMemory]:
    return [LiveMemory(uuid.uuid4(), project_id, text, T0 + dt.timedelta(days=i)) for i, text in enumerate(texts)]


def test_equal_texts_merge_into_the_oldest_without_a_close_pair() -> None:
    old, new = memories("The user's editor is Vim", "the user\u2019s editor is vim.")
    assert plan_merges([old, new], [], threshold=0.95) == (1, [(new.id, old.id)])


def test_a_close_pair_merges_only_when_it_is_the_same_fact() -> None:
    a, b, c = memories("The user is 31 years old", "The user is 32 years old", "The user is 31 years old now")
    pairs = [NearPair(a.id, b.id, 0.99), NearPair(a.id, c.id, 0.97)]
    assert plan_merges([a, b, c], pairs, threshold=0.95) == (1, [(c.id, a.id)])


def test_scopes_are_never_merged_across() -> None:
    (a,) = memories("Uses pnpm")
    (b,) = memories("uses pnpm", project_id="web")
    assert plan_merges([a, b], [NearPair(a.id, b.id, 1.0)], threshold=0.9) == (0, [])


def test_a_chain_is_not_collapsed_through_its_middle() -> None:
    a, b, c = memories("Uses pnpm daily", "Uses pnpm", "uses pnpm")
    # b ~ a and c ~ b: c merges into b (equal texts), and b, now kept, is not merged away this run.
    pairs = [NearPair(a.id, b.id, 0.96), NearPair(b.id, c.id, 1.0)]
    found, merges = plan_merges([a, b, c], pairs, threshold=0.95)
    assert found == 2 and merges == [(c.id, b.id)]


def test_near_pairs_are_found_per_scope_each_once() -> None:
    def unit(*values: float) -> np.ndarray:
        vector = np.asarray(values, dtype=np.float32)
        return vector / np.linalg.norm(vector)

    a, b, c = (
        LiveMemory(uuid.uuid4(), None, t, T0, unit(*v)) for t, v in [("a", (1, 0)), ("b", (1, 0.1)), ("c", (0, 1))]
    )
    d = LiveMemory(uuid.uuid4(), "web", "d", T0, unit(1, 0))
    pairs = near_pairs([a, b, c, d], threshold=0.99)
    assert [(p.first, p.second) for p in pairs] == [(a.id, b.id)]
    assert pairs[0].similarity == pytest.approx(float(unit(1, 0) @ unit(1, 0.1)))


def test_a_chain_of_updates_supersedes_each_by_the_next_and_merged_memories_take_no_part() -> None:
    a, b, c, d = memories("The user is 31 years old", "The user is 32 years old", "The user is 33 years old",
                          "The user is 34 years old")  # fmt: skip
    pairs = [NearPair(x.id, y.id, 0.97) for i, x in enumerate((a, b, c, d)) for y in (a, b, c, d)[i + 1 :]]
    assert plan_supersessions([a, b, c, d], pairs) == [(a.id, b.id), (b.id, c.id), (c.id, d.id)]
    assert plan_supersessions([a, b, c, d], pairs, merged=[b.id]) == [(a.id, c.id), (c.id, d.id)]


def test_events_swaps_and_other_scopes_are_never_superseded() -> None:
    paris, rome = memories("The user visited Paris", "The user visited Rome")
    anna, ben = memories("Anna employs Ben", "Ben employs Anna")
    home, web = [*memories("The user is 31 years old"), *memories("The user is 32 years old", project_id="web")]
    pairs = [NearPair(paris.id, rome.id, 0.9), NearPair(anna.id, ben.id, 0.98), NearPair(home.id, web.id, 0.97)]
    assert plan_supersessions([paris, rome, anna, ben, home, web], pairs) == []


def test_a_pair_said_at_the_same_instant_is_left_and_valid_time_orders_the_rest() -> None:
    same = [LiveMemory(uuid.uuid4(), None, f"The user is {n} years old", T0) for n in (31, 32)]
    pairs = [NearPair(same[0].id, same[1].id, 0.97)]
    assert plan_supersessions(same, pairs) == []
    later_stated = LiveMemory(uuid.uuid4(), None, "The user lives in Lisbon", T0 + dt.timedelta(days=9), valid_from=T0)
    earlier_stated = LiveMemory(
        uuid.uuid4(), None, "The user lives in Porto", T0, valid_from=T0 + dt.timedelta(days=30)
    )
    live = [later_stated, earlier_stated]
    assert plan_supersessions(live, [NearPair(live[0].id, live[1].id, 0.9)]) == [(later_stated.id, earlier_stated.id)]


def test_facts_about_different_friends_are_neither_merged_nor_superseded() -> None:
    """Issue 42: consolidation superseded 9 of 10 friends' birthdays of one shape (each friend's
    name read as the birthday's value); a first-person fact and its third-person form merge."""
    friends = ["Ana", "Rita", "Jonas", "Paul", "Mia", "Omar", "Lea", "Ivo", "Sven", "Zoe"]
    live = memories(*(f"The birthday of the user's friend {name} is on 3 May" for name in friends))
    pairs = [NearPair(a.id, b.id, 0.97) for i, a in enumerate(live) for b in live[i + 1 :]]
    assert plan_supersessions(live, pairs) == []
    assert plan_merges(live, pairs, threshold=0.95) == (0, [])
    first, third = memories("I live in Berlin", "The user lives in Berlin.")
    assert plan_merges([first, third], [NearPair(first.id, third.id, 0.96)], threshold=0.95) == (
        1,
        [(third.id, first.id)],
    )


def test_a_declined_pair_is_never_planned() -> None:
    """A reviewer rejected merging ``new`` into ``old``: no run plans it again; other pairs stand."""
    old, middle, new = memories("The user's editor is Vim", "the user's editor is vim", "The user\u2019s editor is Vim")
    found, merges = plan_merges([old, middle, new], [], threshold=0.95, declined={(new.id, old.id)})
    assert (found, merges) == (2, [(middle.id, old.id)])
    assert plan_merges([old, new], [], threshold=0.95, declined={(new.id, old.id)}) == (1, [])


def test_a_declined_retirement_is_not_planned_and_a_later_update_stands_instead() -> None:
    a, b, c = memories("The user is 31 years old", "The user is 32 years old", "The user is 33 years old")
    pairs = [NearPair(a.id, b.id, 0.99), NearPair(a.id, c.id, 0.98), NearPair(b.id, c.id, 0.99)]
    assert plan_supersessions([a, b, c], pairs) == [(a.id, b.id), (b.id, c.id)]
    assert plan_supersessions([a, b, c], pairs, declined={(a.id, b.id)}) == [(a.id, c.id), (b.id, c.id)]
