"""Everyday corrections, ended events and their controls, as people word them (issue 42): each an
earlier statement, a later one, and whether the later one ends the earlier (it then supersedes it,
and the earlier is no longer presented as current) or both hold.

Two sets. ``DEVELOPMENT`` is what the reading of statements (:mod:`rushmem.ingest.facts`) was
written from. ``HELD_OUT`` was written before those rules, in other words and other shapes, and
never used to write or tune them: its figure is the rules' reach on phrasings they were not made
for, and is reported on its own (``rushmem bench truth``, tests/unit/test_ingest_facts.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Sequence

from rushmem.service import Memory
from rushmem_contract.models import ChatMessage, ConversationEnded, NewMemory


@dataclasses.dataclass(frozen=True)
class Phrasing:
    earlier: str
    later: str
    ends: bool  # the later statement ends the earlier one
    kind: str  # "correction", "event" (an event a later statement ends), "control"


def _c(earlier: str, later: str) -> Phrasing:
    return Phrasing(earlier, later, True, "correction")


def _e(earlier: str, later: str) -> Phrasing:
    return Phrasing(earlier, later, True, "event")


def _keep(earlier: str, later: str) -> Phrasing:
    return Phrasing(earlier, later, False, "control")


DEVELOPMENT: tuple[Phrasing, ...] = (
    # First person and third person alike, in either order.
    _c("I live in Berlin", "The user lives in Munich"),
    _c("The user lives in Berlin", "I live in Munich now"),
    _c("I'm 31 years old", "I'm 32 years old"),
    _c("The user is 40 years old", "I'm 41"),
    _c("My favourite colour is blue", "My favourite colour is green these days"),
    _c("My dog's name is Rex", "Actually my dog's name is Max"),
    # Moves and switches.
    _c("I live in Berlin", "I moved from Berlin to Munich"),
    _c("I work at Google", "I switched to Microsoft"),
    _c("I use Vim for coding", "I switched from Vim to Emacs"),
    _c("I work as a nurse", "I work as a teacher now"),
    # Ends: not anymore, quit, broke up.
    _c("I'm vegetarian", "I'm not vegetarian anymore"),
    _c("I smoke", "I quit smoking"),
    _c("I have a boyfriend named Tom", "I broke up with Tom"),
    _c("I drink coffee every morning", "I don't drink coffee anymore"),
    _c("I speak French at work", "Since March I speak German at work"),
    # Events a later statement ends.
    _e("The user moved to Berlin.", "The user lives in Munich."),
    _e("I moved to Lisbon", "I live in Porto now"),
    # Controls: both hold.
    _keep("I have a cat named Luna", "I also have a cat named Milo"),
    _keep("I visited Paris", "I visited Rome"),
    _keep("I live in Berlin", "My colleague lives in Paris"),
    _keep("I live in Berlin", "I might move to Munich next year"),
    _keep("I speak English", "I speak Spanish too"),
    _keep("The birthday of the user's friend Ana is on 3 May", "The birthday of the user's friend Rita is on 3 May"),
    _keep("My sister lives in Rome", "I live in Milan"),
    # Added after the held-out figures: a change marked on a verb that may hold several values.
    _keep("The user prefers TypeScript", "I prefer dark mode now"),
    _keep("I play tennis", "I play chess now"),
    _keep("I like jazz", "I like hiking these days"),
)

# Written before the rules, not used to write them.
HELD_OUT: tuple[Phrasing, ...] = (
    _c("I'm based in Amsterdam", "I relocated to Rotterdam last month"),
    _c("I am 27", "I just turned 28"),
    _c("My wife's name is Sara", "My wife is called Lena"),
    _c("I'm a software engineer at Spotify", "I got a new job at Klarna"),
    _c("I'm vegan", "I started eating fish again, so I'm no longer vegan"),
    _c("My favorite band is Muse", "These days my favorite band is Radiohead"),
    _c("I play tennis on weekends", "I stopped playing tennis"),
    _c("I'm dating Marco", "Marco and I split up"),
    _c("My cat is called Whiskers", "Actually, my cat is called Mittens"),
    _c("I drive a Honda Civic", "I sold my Honda and now I drive a Tesla"),
    _c("I write my code in Python", "I've moved on to Rust for all my code"),
    _c("I go to the gym three times a week", "I go to the gym twice a week now"),
    _c("I work for Deloitte", "I left Deloitte in June"),
    _e("The user started a job at Siemens.", "The user works at Bosch now."),
    _e("I adopted a parrot named Kiwi", "Kiwi, my parrot, passed away"),
    _keep("I have two kids", "My brother has three kids"),
    _keep("I've been to Japan", "I've been to Peru as well"),
    _keep("My manager lives in Oslo", "I live in Bergen"),
    _keep("I live in Madrid", "If I ever moved, it would be to Valencia"),
    _keep("I speak Italian", "I'm also fluent in Portuguese"),
    _keep("My friend Jonas works at SAP", "My friend Paul works at SAP"),
    _keep("I own a bike", "I also own a scooter"),
    _keep("I live in Dublin", "I'm thinking about moving to Cork"),
)


@dataclasses.dataclass
class Tally:
    """One set through one door: cases of each kind and how many came out right."""

    total: dict[str, int] = dataclasses.field(default_factory=dict)
    right: dict[str, int] = dataclasses.field(default_factory=dict)
    wrong: list[str] = dataclasses.field(default_factory=list)
    unread: int = 0  # cases whose earlier statement the extractor kept nothing of (not counted)

    def count(self, case: Phrasing, ok: bool) -> None:
        self.total[case.kind] = self.total.get(case.kind, 0) + 1
        self.right[case.kind] = self.right.get(case.kind, 0) + ok
        if not ok:
            self.wrong.append(f"{case.kind}: {case.earlier!r} -> {case.later!r}")

    def share(self, kind: str) -> float:
        return self.right.get(kind, 0) / self.total[kind] if self.total.get(kind) else 0.0

    def figure(self, kind: str) -> str:
        return f"{self.right.get(kind, 0)}/{self.total.get(kind, 0)}"


def run_phrasings(service: Memory, cases: Sequence[Phrasing], *, label: str) -> tuple[Tally, Tally]:
    """Each case on users of its own, sent with default arguments, the earlier statement, then the
    later one: through ``Memory.add`` (what POST /memories, MCP ``remember`` and ``rushmem add``
    call) and as two conversations (the configured extractor's path; a case worded in the third
    person is an extractor's output, not a chat message, and is left out there). Right: an ending
    statement leaves the earlier one superseded, with its end (``valid_until``) and out of the
    recalled block, and the later one current; a control leaves both current."""
    added, talked = Tally(), Tally()
    for n, case in enumerate(cases):
        user = f"phrasing-{label}-add-{n:03d}"
        first = service.add(NewMemory(content=case.earlier), user_id=user).ids
        later = service.add(NewMemory(content=case.later), user_id=user).ids
        added.count(case, _right(service, user, case, first, later))
        if "the user" in f"{case.earlier} {case.later}".lower():
            continue
        user = f"phrasing-{label}-conversation-{n:03d}"
        first = _say(service, user, case.earlier, 0)
        later = _say(service, user, case.later, 1)
        if not first:
            talked.unread += 1
            continue
        # An extractor may keep nothing of a hypothesis; the earlier statement must then stay current.
        talked.count(case, bool(later or not case.ends) and _right(service, user, case, first, later))
    return added, talked


def _say(service: Memory, user: str, text: str, turn: int) -> list[uuid.UUID]:
    at = dt.datetime.now(dt.UTC)
    message = ChatMessage(role="user", content=text, created_at=at)
    outcome = service.ingest_conversation(
        ConversationEnded(user_id=user, conversation_id=f"{user}-{turn}", ended_at=at, messages=[message])
    )
    return list(outcome.ids)


def _right(service: Memory, user: str, case: Phrasing, first: Sequence[uuid.UUID], later: Sequence[uuid.UUID]) -> bool:
    rows = {m.id: m for m in service.list(user_id=user, include_inactive=True, limit=100).memories}
    current = {i for i, m in rows.items() if m.superseded_by is None and m.valid_until is None}
    if not case.ends:
        return set(first) <= current and set(later) <= current
    block = service.recall(case.later, user_id=user).prompt_block
    ended = [rows[i] for i in first if i in rows]
    return (
        bool(ended)
        and all(m.superseded_by is not None and m.valid_until is not None for m in ended)
        and all(m.content not in block for m in ended)
        and set(later) <= current
    )
