"""The write path's rule for a new fact and its stored neighbours (rushmem.ingest.neighbours),
without a database: the store reads the neighbours and carries out what the rule says."""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid

import numpy as np

from rushmem.ingest.neighbours import SameFactRule
from rushmem.records import MemoryRow, Neighbour

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def row(text: str) -> MemoryRow:
    return MemoryRow("u1", None, text, text.encode(), "fact", np.ones(4, dtype=np.float32) / 2)


def near(text: str, similarity: float) -> Neighbour:
    return Neighbour(uuid.uuid4(), text, T0, similarity)


def test_a_restatement_folds_into_the_first_near_enough_neighbour_stating_the_same_fact() -> None:
    far, same, also = (
        near("The user is 31 years old.", 0.8),
        near("the user is 31 years old", 0.95),
        near("The user is 31 years old!", 0.99),
    )
    rule = SameFactRule.from_thresholds(0.9, 0.9)
    matches = rule.judge([row("The user is 31 years old")], {0: [same, also, far]})
    assert matches.restates == {0: same.id} and matches.updates == {}
    assert rule.judge([row("The user is 31 years old")], {0: [far]}).restates == {}


def test_another_value_updates_every_near_enough_neighbour_unless_an_extractor_judged_the_row() -> None:
    old = near("The user is 31 years old", 0.95)
    rule = SameFactRule.from_thresholds(0.9, 0.9)
    rows = [row("The user is 32 years old")]
    assert rule.judge(rows, {0: [old]}).updates == {0: [old]}
    assert rule.judge(rows, {0: [old]}, judged={0}).updates == {}
    assert SameFactRule.from_thresholds(0.9, 0.97).judge(rows, {0: [old]}).updates == {}


def test_a_threshold_above_one_turns_its_part_off_and_none_reads_nothing() -> None:
    assert SameFactRule.from_thresholds(0.9, 0.8).floor == 0.8
    assert SameFactRule.from_thresholds(1.5, 0.8) == SameFactRule(None, 0.8)
    assert SameFactRule.from_thresholds(1.5, 2.0).floor is None
    off = SameFactRule.from_thresholds(2.0, 0.9)
    assert off.judge([row("The user is 31 years old")], {0: [near("The user is 31 years old.", 1.0)]}).restates == {}


def test_a_user_wide_row_updates_a_projects_value_but_never_folds_into_it() -> None:
    """Issue 32: a user-wide correction is one in every project; folding stays within a scope."""
    rule = SameFactRule(fold=0.9, update=0.3)
    other = Neighbour(uuid.uuid4(), "The user is 31 years old", T0, 0.97, "p")
    same_elsewhere = Neighbour(uuid.uuid4(), "The user lives in Lisbon", T0, 0.99, "p")
    rows = [row("The user is 32 years old"), row("The user lives in Lisbon")]
    matches = rule.judge(rows, {0: [other], 1: [same_elsewhere]})
    assert matches.updates == {0: [other]} and matches.restates == {}


def test_a_project_row_ends_a_user_wide_value_of_the_users_own_state_only() -> None:
    """Issue 42 item 6: a project's "I'm 32" ends the user-wide age (one age in every project); a
    project's value of something of the user's ("the user's team") leaves the user-wide one to the
    other projects, and a project's row never folds into a user-wide fact."""
    rule = SameFactRule(fold=0.9, update=0.3)
    in_p = dataclasses.replace(row("x"), project_id="p")
    age = Neighbour(uuid.uuid4(), "The user is 31 years old", T0, 0.9, None)
    team = Neighbour(uuid.uuid4(), "The user's team is 4 people", T0, 0.9, None)
    same = Neighbour(uuid.uuid4(), "The user is 32 years old", T0, 0.99, None)
    rows = [
        dataclasses.replace(in_p, content="I'm 32"),
        dataclasses.replace(in_p, content="The user's team is 5 people"),
        dataclasses.replace(in_p, content="The user is 32 years old"),
    ]
    matches = rule.judge(rows, {0: [age], 1: [team], 2: [same]})
    assert matches.updates == {0: [age]} and matches.restates == {}


def test_a_statement_in_the_first_person_folds_into_its_third_person_form() -> None:
    """Issue 42: "I live in Berlin" and "The user lives in Berlin." are one fact, though their
    embeddings are further apart than the fold's threshold."""
    rule = SameFactRule(fold=0.95, update=0.3)
    stored = near("The user lives in Berlin.", 0.7)
    assert rule.judge([row("I live in Berlin")], {0: [stored]}).restates == {0: stored.id}
    moved = near("The user lives in Munich.", 0.7)
    assert rule.judge([row("I live in Berlin")], {0: [moved]}).updates == {0: [moved]}


def test_a_switch_that_names_no_slot_ends_only_the_nearest_thing_it_can_end() -> None:
    rule = SameFactRule(fold=0.95, update=0.3)
    employer, editor, drink = (
        near("I work at Google", 0.6),
        near("The user uses Vim", 0.4),
        near("The user drinks coffee", 0.35),
    )
    matches = rule.judge([row("I switched to Microsoft")], {0: [employer, editor, drink]})
    assert matches.updates == {0: [employer]} and matches.restates == {}
    hypothetical = rule.judge([row("I might switch to Microsoft")], {0: [employer]})
    assert hypothetical.updates == {}
