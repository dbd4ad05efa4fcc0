"""`bench truth`'s cases of issue 32 (facts as people state them) and its adversarial timings.

Cases, each on users of its own: corrections inside one conversation (the later statement wins, the
earlier one valid until then), a replacement valid from a later time (current only then), content
edits (``as_of`` before the edit reads the old text), corrections across scopes (a project's block
holds one value), and sets of distinct facts that look alike (different weekdays, directions,
qualifiers, subjects) through the write path and consolidation (none may be retired).

Timings: the write path's same-fact matcher (five long number-heavy memories beside similar ones,
and consolidating two dozen of them), redaction (digit runs, metadata full of e-mail addresses) and
recall (a 4,000-character query) against ordinary inputs of the same size; the ratios are what the
issue bounds (within 2x).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import random
import time
import uuid
from collections.abc import Callable

import numpy as np

from rushmem.ingest.consolidation import near_pairs, plan_merges, plan_supersessions
from rushmem.ingest.redaction import Redactor
from rushmem.privacy.redact import PiiPolicy
from rushmem.records import LiveMemory
from rushmem.service import Memory
from rushmem_contract.models import ChatMessage, ConversationEnded, ImportLine, MemoryChanges, NewMemory

T0 = dt.datetime(2025, 3, 1, 9, 0, tzinfo=dt.UTC)
DISTINCT_SETS = (
    ("The user has a yoga class on {a} at 6 pm", ("Monday", "Wednesday", "Friday")),
    ("The user takes the train {a} Porto on May 3", ("to", "from")),
    ("The user's {a} is Ana", ("manager", "former manager", "ex-manager")),
    ("The user's {a} is 7 years old", ("daughter", "son", "niece")),
    ("The user runs {a} work", ("before", "after")),
)


@dataclasses.dataclass
class Cases:
    conversations: int = 0
    conversation_corrected: int = 0  # only the later value current, the earlier one valid before it
    future: int = 0
    future_ok: int = 0  # the old value current now, the replacement current once its time comes
    edits: int = 0
    edits_past_kept: int = 0  # as_of before the edit reads the old text, now the new one
    cross_scope: int = 0
    cross_scope_one_value: int = 0  # the project's block holds the newer value only
    project_corrections: int = 0
    project_correction_ended: int = 0  # a project's correction of the user's age ends the user-wide one
    distinct: int = 0
    distinct_retired: int = 0  # distinct facts folded, superseded or merged (must be 0)


def _contents(service: Memory, user: str, **kw: object) -> set[str]:
    return {m.content for m in service.list(user_id=user, limit=500, **kw).memories}  # type: ignore[arg-type]


def run_cases(service: Memory, users: int, seed: int) -> Cases:
    rng = random.Random(seed)  # noqa: S311  (a reproducible stream, not a secret)
    cases = Cases()
    now = dt.datetime.now(dt.UTC)
    for u in range(users):
        user = f"case-conv-{u:03d}"
        old, new = rng.sample(range(2, 17), 2)
        said = [f"My daughter is {old}.", "She loves drawing.", f"Actually, my daughter is {new}."]
        messages = [
            ChatMessage(role="user", content=t, created_at=T0 + dt.timedelta(minutes=5 * i)) for i, t in enumerate(said)
        ]
        service.ingest_conversation(
            ConversationEnded(user_id=user, ended_at=T0 + dt.timedelta(hours=1), messages=messages)
        )
        cases.conversations += 1
        then = _contents(service, user, as_of=T0 + dt.timedelta(minutes=1))
        current = _contents(service, user)
        cases.conversation_corrected += (
            f"The user's daughter is {new}." in current
            and f"The user's daughter is {old}." not in current
            and f"The user's daughter is {old}." in then
        )

        user = f"case-future-{u:03d}"
        a, b = rng.sample(["Acme", "Globex", "Initech", "Hooli", "Umbrella"], 2)
        first = service.add(
            NewMemory(content=f"The user works at {a}", valid_from=now - dt.timedelta(days=30)), user_id=user
        )
        later = now + dt.timedelta(days=rng.randint(1, 30))
        service.add(NewMemory(content=f"The user works at {b}", valid_from=later, supersedes=first.ids), user_id=user)
        recalled = {m.content for m in service.recall("Where does the user work?", user_id=user).memories}
        then_recalled = {
            m.content
            for m in service.recall(
                "Where does the user work?", user_id=user, now=later + dt.timedelta(hours=1)
            ).memories
        }
        cases.future += 1
        cases.future_ok += _contents(service, user) == recalled == {f"The user works at {a}"} and then_recalled == {
            f"The user works at {b}"
        }

        user = f"case-edit-{u:03d}"
        a, b = rng.sample(["Volvo", "Tesla", "Fiat", "Skoda", "Mazda"], 2)
        memory = service.add(
            NewMemory(content=f"The user drives a {a}", valid_from=now - dt.timedelta(days=9)), user_id=user
        )
        before = dt.datetime.now(dt.UTC)
        service.update(memory.ids[0], MemoryChanges(content=f"The user drives a {b}"), user_id=user)
        cases.edits += 1
        cases.edits_past_kept += _contents(service, user, as_of=before) == {f"The user drives a {a}"} and _contents(
            service, user
        ) == {f"The user drives a {b}"}

        user = f"case-scope-{u:03d}"
        age = rng.randint(20, 60)
        service.add(NewMemory(content=f"The user is {age} years old", valid_from=T0), user_id=user, project_id="p")
        service.add(
            NewMemory(content=f"The user is {age + 1} years old", valid_from=T0 + dt.timedelta(days=90)), user_id=user
        )
        block = service.recall("How old is the user?", user_id=user, project_id="p").memories
        cases.cross_scope += 1
        cases.cross_scope_one_value += [m.content for m in block if "years old" in m.content] == [
            f"The user is {age + 1} years old"
        ]

        user = f"case-project-{u:03d}"
        age = rng.randint(20, 60)
        service.add(NewMemory(content=f"The user is {age} years old", valid_from=T0), user_id=user)
        service.add(
            NewMemory(content=f"The user is {age + 1} years old", valid_from=T0 + dt.timedelta(days=90)),
            user_id=user,
            project_id="p",
        )
        block = service.recall("How old is the user?", user_id=user, project_id="p").memories
        cases.project_corrections += 1
        cases.project_correction_ended += [m.content for m in block if "years old" in m.content] == [
            f"The user is {age + 1} years old"
        ] and not any("years old" in t for t in _contents(service, user, project_id="q"))

        user = f"case-distinct-{u:03d}"
        texts = [template.format(a=v) for template, values in DISTINCT_SETS for v in values]
        for i, text in enumerate(texts):
            service.add(NewMemory(content=text, valid_from=T0 + dt.timedelta(days=i)), user_id=user)
        imported = f"{user}-import"
        service.import_([ImportLine(user_id=imported, content=t, created_at=T0) for t in texts])
        cases.distinct += 2 * len(texts)
    service.admin.consolidate(restart=True, threshold=0.5)
    texts = [template.format(a=v) for template, values in DISTINCT_SETS for v in values]
    for u in range(users):
        for user in (f"case-distinct-{u:03d}", f"case-distinct-{u:03d}-import"):
            cases.distinct_retired += len(texts) - len(_contents(service, user) & set(texts))
    return cases


# ---- adversarial timings ---------------------------------------------------------------------


def _text(rng: random.Random, chars: int, *, numbers: bool) -> str:
    words = ["the", "user", "paid", "for", "items", "on", "and", "then", "ordered", "more"]
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(str(rng.randint(1, 99_999)) if numbers and rng.random() < 0.6 else rng.choice(words))
    return " ".join(out)[:chars].strip()


def _plan(live: list[LiveMemory]) -> None:
    """What consolidation decides for one user's memories: merges, then stale values."""
    pairs = near_pairs(live, threshold=0.5)
    _found, merges = plan_merges(live, pairs, threshold=0.5)
    plan_supersessions(live, near_pairs(live, threshold=0.3, neighbours=8), merged=[d for d, _ in merges])


def _seconds(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


@dataclasses.dataclass
class Timings:
    match_ordinary: float = 0.0
    match_numbers: float = 0.0
    consolidate_ordinary: float = 0.0
    consolidate_numbers: float = 0.0
    redact_ordinary: float = 0.0
    redact_digits: float = 0.0
    redact_emails: float = 0.0
    redact_metadata: float = 0.0
    recall_2000: float = 0.0
    recall_4000: float = 0.0

    @staticmethod
    def ratio(slow: float, fast: float) -> float:
        return slow / fast if fast > 0 else 0.0


def run_timings(service: Memory, seed: int) -> Timings:
    """Each adversarial shape against an ordinary input of the same size, on users of their own."""
    rng = random.Random(seed)  # noqa: S311
    out = Timings()
    for numbers in (False, True):
        user = f"adv-match-{'numbers' if numbers else 'ordinary'}"
        base = [_text(rng, 1990, numbers=numbers) for _ in range(5)]
        service.add([NewMemory(content=t) for t in base], user_id=user)
        # Beside similar ones: the same texts with the last word changed (neighbours of each other).
        similar = [t.rsplit(" ", 1)[0] + (" 12345" if numbers else " items") for t in base]
        elapsed = _seconds(functools.partial(service.add, [NewMemory(content=t) for t in similar], user_id=user))
        # Consolidation's decisions for two dozen of them (the matcher's part: no database).
        texts = [_text(rng, 2000, numbers=numbers) for _ in range(12)]
        texts += [t[:-5] + " more" for t in texts]
        vectors = service.admin.embedder.embed(texts)
        live = [
            LiveMemory(uuid.uuid4(), None, t, T0 + dt.timedelta(seconds=i), np.asarray(v, dtype=np.float32))
            for i, (t, v) in enumerate(zip(texts, vectors, strict=True))
        ]
        consolidated = _seconds(functools.partial(_plan, live))
        if numbers:
            out.match_numbers, out.consolidate_numbers = elapsed, consolidated
        else:
            out.match_ordinary, out.consolidate_ordinary = elapsed, consolidated
    redactor = Redactor(PiiPolicy.parse("redact"))  # every category on: the detectors all run
    ordinary = NewMemory(content=_text(rng, 2000, numbers=False))
    # Metadata of the same size as the e-mail addresses' (keys and values of 15 characters).
    plain = NewMemory(
        content="The user has contacts", metadata={f"note number {i:03d}": f"plain value {i:03d}" for i in range(100)}
    )
    digits = NewMemory(content="".join(rng.choice("0123456789 ") for _ in range(2000)).strip())
    emails = NewMemory(
        content="The user has contacts", metadata={f"u{i}@example.com": f"u{i}@example.org" for i in range(100)}
    )

    def best(memory: NewMemory) -> float:  # milliseconds each: the least of five runs
        return min(_seconds(functools.partial(redactor.apply, [memory])) for _ in range(5))

    out.redact_ordinary, out.redact_digits = best(ordinary), best(digits)
    out.redact_metadata, out.redact_emails = best(plain), best(emails)
    user = "adv-recall"
    service.add([NewMemory(content=_text(rng, 200, numbers=False) + f" fact {i}") for i in range(50)], user_id=user)
    vocabulary = [f"w{i}" for i in range(2000)]
    for chars, field in ((2000, "recall_2000"), (4000, "recall_4000")):
        query = " ".join(rng.choice(vocabulary) for _ in range(chars // 5))[:chars]
        service.recall(query, user_id=user)  # warm
        setattr(out, field, min(_seconds(functools.partial(service.recall, query, user_id=user)) for _ in range(3)))
    return out
