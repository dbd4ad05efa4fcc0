"""rushmem.ingest.facts: a near duplicate folds only into the same fact; one slot with another value
is an update (supersession); anything else is a new memory."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from rushmem.ingest.facts import same_fact, same_statement, switched_value, updated_value
from rushmem_tools.bench.truth_phrasings import DEVELOPMENT, HELD_OUT, Phrasing

NAMES = ["Alice", "Bob", "Carla", "Dmitri", "Elena", "Farid", "Greta", "Hiro"]
VERBS = ["employs", "owes", "pays", "emails", "visits", "trusts", "hired", "met"]
UNITS = ["euros", "dollars", "hours", "days", "books"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August"]


@st.composite
def facts(draw: st.DrawFn) -> dict[str, object]:
    a, b = draw(st.lists(st.sampled_from(NAMES), min_size=2, max_size=2, unique=True))
    return {
        "a": a,
        "b": b,
        "verb": draw(st.sampled_from(VERBS)),
        "amount": draw(st.integers(min_value=1, max_value=9999)),
        "unit": draw(st.sampled_from(UNITS)),
        "month": draw(st.sampled_from(MONTHS)),
        "day": draw(st.integers(min_value=1, max_value=28)),
        "negated": draw(st.booleans()),
    }


def say(f: dict[str, object]) -> str:
    verb = f"does not {str(f['verb']).removesuffix('s')}" if f["negated"] else f["verb"]
    return f"{f['a']} {verb} {f['b']} {f['amount']} {f['unit']} on {f['month']} {f['day']}"


@given(facts(), st.integers(min_value=1, max_value=9999))
def test_another_number_is_never_the_same_fact(fact: dict[str, object], amount: int) -> None:
    assume(amount != fact["amount"])
    assert not same_fact(say(fact), say({**fact, "amount": amount}))


@given(facts(), st.sampled_from(MONTHS), st.integers(min_value=1, max_value=28))
def test_another_date_is_never_the_same_fact(fact: dict[str, object], month: str, day: int) -> None:
    assume((month, day) != (fact["month"], fact["day"]))
    assert not same_fact(say(fact), say({**fact, "month": month, "day": day}))


@given(facts())
def test_swapped_names_are_never_the_same_fact(fact: dict[str, object]) -> None:
    assert not same_fact(say(fact), say({**fact, "a": fact["b"], "b": fact["a"]}))


@given(facts())
def test_the_opposite_polarity_is_never_the_same_fact(fact: dict[str, object]) -> None:
    assert not same_fact(say(fact), say({**fact, "negated": not fact["negated"]}))


@given(facts())
def test_a_changed_fact_is_never_refreshed_in_either_direction(fact: dict[str, object]) -> None:
    changed = [
        {**fact, "amount": int(str(fact["amount"])) + 1},
        {**fact, "a": fact["b"], "b": fact["a"]},
        {**fact, "negated": not fact["negated"]},
        {**fact, "day": int(str(fact["day"])) % 28 + 1},
    ]
    for other in changed:
        assert not same_fact(say(other), say(fact))


@given(facts())
def test_the_same_fact_worded_with_another_case_or_stop_is_the_same(fact: dict[str, object]) -> None:
    text = say(fact)
    assert same_fact(text, text + ".")
    assert same_fact(text, "  " + text.replace(" ", "  "))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The user is 31 years old", "The user is 32 years old"),
        ("The user was born on March 3, 1990", "The user was born on March 4, 1990"),
        ("Alice employs Bob", "Bob employs Alice"),
        ("Alice owes Bob 50 euros", "Bob owes Alice 50 euros"),
        ("Alice owes Bob 50 euros", "Alice owes Bob 50 dollars"),
        ("The user likes coffee", "The user does not like coffee"),
        ("The user likes coffee", "The user doesn't like coffee"),
        ("The user prefers TypeScript", "The user prefers TypeScript over JavaScript"),
        ("The cat chased the dog", "The dog chased the cat"),
        ("The user's favourite colour is blue", "The user's favourite colour is green"),
        ("The meeting is on Monday", "The meeting is on Tuesday"),
        ("The user has two cats", "The user has three cats"),
    ],
)
def test_the_issues_pairs_are_different_facts(a: str, b: str) -> None:
    assert not same_fact(a, b)
    assert not same_fact(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The user likes Python", "The user likes Python."),
        ("The user likes Python", "User likes python"),
        ("The user is vegetarian", "The user is a vegetarian"),
        ("The user's sister is named Maria", "The user's sister is called Maria"),
    ],
)
def test_restatements_are_the_same_fact(a: str, b: str) -> None:
    assert same_fact(a, b)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The user is 31 years old", "The user is 32 years old"),
        ("The user lives in Paris", "The user lives in Berlin"),
        ("The user's birthday is on March 3", "The user's birthday is on April 5"),
        ("The user has 2 cats", "The user has 3 cats"),
        ("The project deadline is June 1", "The project deadline is June 15"),
        ("The user works at Acme", "The user works at Globex"),
        ("The user earns 3000 euros a month", "The user earns 3500 euros a month"),
        # The other polarity of the same statement ends it (or starts it again).
        ("The user likes coffee", "The user does not like coffee"),
        ("The user drinks coffee", "The user no longer drinks coffee"),
        ("The user uses React", "The user doesn't use React anymore"),
        ("The user does not eat meat", "The user eats meat"),
    ],
)
def test_another_value_in_one_slot_is_an_update(old: str, new: str) -> None:
    assert updated_value(old, new)
    assert not same_fact(old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Alice employs Bob", "Bob employs Alice"),  # a role swap: both may hold
        ("The user visited Paris", "The user visited Rome"),  # events: both happened
        ("The user went to Paris in 2023", "The user went to Paris in 2024"),
        ("The user likes Python", "The user likes Python and Rust"),  # more said, not another value
        ("The user is 31 years old", "The user is 31 years old"),
        ("The user lives in Paris", "The user's sister lives in Berlin"),  # two changes
        ("Paris", "Berlin"),  # nothing around the value
        ("The user likes tea", "The user likes coffee"),  # not a value or a name
        ("Ulla is the parent of Adra", "Ulla is the parent of Okin"),  # several children: another fact
        ("The user speaks Portuguese", "The user speaks Spanish"),
        ("Lysa is married to Zane", "Adra is married to Zane"),  # another subject: another fact
        ("Fact number 0", "Fact number 60"),  # a label, no statement
        ("Ticket number 12 is open", "Ticket number 13 is open"),  # a number that names a thing
    ],
)
def test_other_changes_are_not_updates(old: str, new: str) -> None:
    assert not updated_value(old, new)


# ---- distinct qualifiers, directions, days and subjects (issue 32) --------------------------------------

PLACES = ["Porto", "Paris", "Berlin", "Lisbon", "Madrid"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
ROLES = ["manager", "mentor", "landlord", "dentist", "coach"]
RELATIVES = ["daughter", "son", "niece", "nephew", "cousin"]
ACTIVITIES = ["yoga class", "piano lesson", "swim practice", "team meeting"]


@st.composite
def distinct_pairs(draw: st.DrawFn) -> tuple[str, str]:
    """Two statements that differ only in a direction, a qualifier, a weekday or the subject: both
    may hold at once, so neither is the same fact as the other nor an update of it."""
    place, name = draw(st.sampled_from(PLACES)), draw(st.sampled_from(NAMES))
    day = draw(st.integers(min_value=1, max_value=28))
    month = draw(st.sampled_from(MONTHS))
    kind = draw(st.sampled_from(["direction", "qualifier", "weekday", "subject"]))
    if kind == "direction":
        thing = draw(st.sampled_from(["train", "flight", "bus", "ferry"]))
        a, b = draw(st.permutations(["from", "to"]))
        return (
            f"The user takes the {thing} {a} {place} on {month} {day}",
            f"The user takes the {thing} {b} {place} on {month} {day}",
        )
    if kind == "qualifier":
        role = draw(st.sampled_from(ROLES))
        qualifier = draw(st.sampled_from(["former", "ex-", "previous", "future"]))
        qualified = f"{qualifier}{role}" if qualifier.endswith("-") else f"{qualifier} {role}"
        pair = [f"The user's {role} is {name}", f"The user's {qualified} is {name}"]
        return tuple(draw(st.permutations(pair)))  # type: ignore[return-value]
    if kind == "weekday":
        one, other = draw(st.lists(st.sampled_from(WEEKDAYS), min_size=2, max_size=2, unique=True))
        activity = draw(st.sampled_from(ACTIVITIES))
        hour = draw(st.integers(min_value=1, max_value=12))
        return (
            f"The user has a {activity} on {one} at {hour} pm",
            f"The user has a {activity} on {other} at {hour} pm",
        )
    one, other = draw(st.lists(st.sampled_from(RELATIVES), min_size=2, max_size=2, unique=True))
    age = draw(st.integers(min_value=1, max_value=40))
    return (f"The user's {one} is {age} years old", f"The user's {other} is {age} years old")


@given(distinct_pairs())
def test_facts_that_hold_at_once_are_neither_the_same_nor_an_update(pair: tuple[str, str]) -> None:
    a, b = pair
    assert not same_fact(a, b) and not same_fact(b, a)
    assert not updated_value(a, b) and not updated_value(b, a)


@given(distinct_pairs(), st.sampled_from(["", ".", " too", " really"]))
def test_each_side_of_a_distinct_pair_still_folds_its_own_restatement(pair: tuple[str, str], tail: str) -> None:
    for text in pair:
        assert same_fact(text, text.lower() + tail)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("The user's former manager is Ana", "The user's manager is Ana"),
        ("The user has a flight from Paris on May 3", "The user has a flight to Paris on May 3"),
        ("The user is moving from Berlin", "The user is moving to Berlin"),
        ("The user's ex-wife is Ana", "The user's wife is Ana"),
        ("The user runs before work", "The user runs after work"),
        ("The user's daughter is 6", "The user's son is 6"),
    ],
)
def test_the_issues_restatements_that_change_the_meaning_are_not_folded(a: str, b: str) -> None:
    assert not same_fact(a, b) and not same_fact(b, a)


def test_another_weekday_is_another_class_not_an_update() -> None:
    assert not updated_value("The user has a yoga class on Monday", "The user has a yoga class on Wednesday")
    assert not updated_value("Monday yoga class at 6 pm", "Wednesday yoga class at 6 pm")
    assert updated_value("The user's yoga class is at 6 pm", "The user's yoga class is at 7 pm")


# ---- one meaning however it is worded (issue 42) ----------------------------------------------------


def _ends(earlier: str, later: str) -> bool:
    return updated_value(earlier, later) or switched_value(earlier, later)


@pytest.mark.parametrize("case", DEVELOPMENT, ids=lambda c: f"{c.kind}: {c.earlier} -> {c.later}")
def test_everyday_corrections_end_what_they_correct_and_controls_hold(case: Phrasing) -> None:
    """Before: 8 of these 24 held through Memory.add (first person never matched the third, a move
    or a switch ended nothing, a friend's birthday replaced another friend's)."""
    assert _ends(case.earlier, case.later) is case.ends


@pytest.mark.parametrize(
    "case", [c for c in HELD_OUT if not c.ends], ids=lambda c: f"{c.kind}: {c.earlier} -> {c.later}"
)
def test_held_out_phrasings_never_end_a_fact_that_still_holds(case: Phrasing) -> None:
    """The held-out set was written before the rules: its corrections are measured by `rushmem bench
    truth` (not all are read yet); none of its controls may be ended."""
    assert not _ends(case.earlier, case.later)
    assert not _ends(case.later, case.earlier) or case.later.startswith(("I", "My"))


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("I live in Berlin", "The user lives in Berlin."),
        ("I'm 32 years old", "The user is 32 years old"),
        ("I'm 32", "The user is 32 years old."),
        ("My dog's name is Rex", "The user's dog's name is Rex"),
        ("I don't drink coffee", "The user doesn't drink coffee."),
        ("I have two cats", "The user has two cats"),
    ],
)
def test_a_statement_in_the_first_person_is_the_same_as_in_the_third(a: str, b: str) -> None:
    assert same_statement(a, b) and same_statement(b, a)
    assert not updated_value(a, b) and not updated_value(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("I live in Berlin", "The user lives in Munich"),
        ("I live in Berlin", "My sister lives in Berlin"),
        ("The user moved to Berlin.", "The user lives in Berlin."),  # the event and the state it began
        ("I live in Berlin", "I might live in Berlin"),
        ("I drink coffee", "I don't drink coffee"),
    ],
)
def test_other_statements_are_not_the_same_statement(a: str, b: str) -> None:
    assert not same_statement(a, b)


def test_facts_about_different_people_of_the_same_shape_never_update_each_other() -> None:
    """Before: "... friend Rita is on 3 May" superseded "... friend Ana is on 3 May" (the name was
    read as the value of a birthday)."""
    names = ["Ana", "Rita", "Jonas", "Paul", "Mia", "Omar", "Lea", "Ivo", "Sven", "Zoe"]
    shapes = [
        "The birthday of the user's friend {} is on 3 May",
        "The user's friend {}'s birthday is on 3 May",
        "My colleague {} lives in Paris",
        "The user's sister {} works at Acme",
        "My friend {} is 30 years old",
    ]
    for shape in shapes:
        for a in names:
            for b in names:
                if a != b:
                    assert not updated_value(shape.format(a), shape.format(b)), (a, b, shape)
