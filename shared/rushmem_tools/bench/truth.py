"""`rushmem bench truth`: facts over time. A generated stream of facts, corrections,
restatements, role swaps and block echoes is written through the write path (``Memory.add``, as
POST /memories), then for every attribute "what is X now" is recalled (the current value must be
there and no stale one) and "what was X at T" (``as_of``) for a time inside each value's validity
(that value, and no other).

Each user has a handful of attributes (an age, a city, a birthday, counts, an employer, a deadline),
each stated, then corrected one to three times, with restatements of the current value (worded the
same, or with another case and punctuation) in between; two role-swapped pairs ("Ana employs Ben",
"Ben employs Ana") that must stay two memories; and echoes: the current facts stated again through
POST /memories (a restatement: it must refresh, never add a memory). Then block echoes: each user
hands over a conversation whose user message pastes the recalled ``[RUSH_MEMORY]`` block (the
recall-loop of mem0#4573); the write path's guard must keep every one of its facts out.

Three variants on separate databases: ours (the same-fact fold and same-attribute supersession),
the fold alone (``same_attribute_threshold`` off: a correction is kept beside the old value), and
an import of the same stream with each restatement also stated as a near duplicate (a word more:
an import keeps near duplicates), where true duplicates per 100 writes are counted before and after
``rushmem consolidate``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import random
from collections.abc import Sequence
from typing import Any

from rushmem.service import Memory
from rushmem_contract.models import ChatMessage, ConversationEnded, ImportLine, NewMemory
from rushmem_tools.bench import truth_cascade, truth_cases, truth_deletes, truth_phrasings
from rushmem_tools.bench.common import ScratchServer, add_database_arguments, open_service, print_table, say

START = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
# Consolidation's similarity floor here: "X" and "X, as stated before" score ~0.85-0.95 on MiniLM;
# below the floor nothing is even compared, above it the same-fact check decides.
CONSOLIDATE_THRESHOLD = 0.8
STEP = dt.timedelta(days=3)
# Services on one database deciding the same held write at once (containers of the stack).
RACERS = 4
NAMES = ["Ana", "Ben", "Chloe", "Dmitri", "Elif", "Farid", "Greta", "Hiro", "Ines", "Jonas", "Kemal", "Lena"]
CITIES = ["Paris", "Berlin", "Lisbon", "Madrid", "Vienna", "Oslo", "Prague", "Dublin", "Zurich", "Athens"]
COMPANIES = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Cyberdyne"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October"]


@dataclasses.dataclass(frozen=True)
class Attribute:
    name: str
    template: str  # with {v}
    question: str

    def values(self, rng: random.Random) -> list[str]:
        if self.name in ("age",):
            start = rng.randint(20, 60)
            return [str(start + i) for i in range(6)]
        if self.name == "city":
            return rng.sample(CITIES, 6)
        if self.name == "employer":
            return rng.sample(COMPANIES, 6)
        if self.name in ("birthday", "deadline"):
            return [f"{m} {rng.randint(1, 28)}" for m in rng.sample(MONTHS, 6)]
        if self.name == "salary":
            return [str(v) for v in rng.sample(range(2000, 9000, 100), 6)]
        return [str(v) for v in rng.sample(range(1, 40), 6)]


ATTRIBUTES = (
    Attribute("age", "The user is {v} years old", "How old is the user?"),
    Attribute("city", "The user lives in {v}", "Where does the user live?"),
    Attribute("birthday", "The user's birthday is on {v}", "When is the user's birthday?"),
    Attribute("cats", "The user has {v} cats", "How many cats does the user have?"),
    Attribute("team", "The user's team has {v} engineers", "How many engineers are on the user's team?"),
    Attribute("deadline", "The project deadline is {v}", "When is the project deadline?"),
    Attribute("salary", "The user earns {v} euros a month", "How much does the user earn a month?"),
    Attribute("employer", "The user works at {v}", "Where does the user work?"),
)


@dataclasses.dataclass(frozen=True)
class Write:
    user_id: str
    content: str
    at: dt.datetime
    kind: str  # fact | correction | restatement | swap | echo
    attribute: str | None = None
    value: str | None = None


@dataclasses.dataclass
class Stream:
    writes: list[Write]
    # (user, attribute) -> [(value, valid from, valid until or None)]
    timeline: dict[tuple[str, str], list[tuple[str, dt.datetime, dt.datetime | None]]]
    swaps: list[tuple[str, str, str]]  # (user, statement, its role swap)
    end: dt.datetime


def restated(text: str, rng: random.Random) -> str:
    """The same fact worded the same, or with another case and a final full stop."""
    return rng.choice([text, text.lower(), text + "."])


def generate(users: int, seed: int) -> Stream:
    rng = random.Random(seed)  # noqa: S311  (a reproducible stream, not a secret)
    writes: list[Write] = []
    timeline: dict[tuple[str, str], list[tuple[str, dt.datetime, dt.datetime | None]]] = {}
    swaps: list[tuple[str, str, str]] = []
    end = START
    for u in range(users):
        user = f"truth-user-{u:03d}"
        at = START
        current: dict[str, str] = {}
        plans = {a.name: (a, a.values(rng), rng.randint(1, 3)) for a in ATTRIBUTES}
        steps: list[tuple[str, int]] = []
        for name, (_a, _values, corrections) in plans.items():
            steps += [(name, i) for i in range(corrections + 1)]
        # Each attribute's values in order; attributes interleaved.
        rng.shuffle(steps)
        steps.sort(key=lambda s: s[1])
        for name, index in steps:
            attribute, values, _ = plans[name]
            at += STEP
            value = values[index]
            content = attribute.template.format(v=value)
            writes.append(Write(user, content, at, "fact" if index == 0 else "correction", name, value))
            periods = timeline.setdefault((user, name), [])
            if periods:
                old, since, _ = periods[-1]
                periods[-1] = (old, since, at)
            periods.append((value, at, None))
            current[name] = content
            if rng.random() < 0.4:  # a restatement of what is now true
                at += STEP
                writes.append(Write(user, restated(content, rng), at, "restatement", name, value))
        a, b = rng.sample(NAMES, 2)
        for statement, swapped in (
            (f"{a} employs {b}", f"{b} employs {a}"),
            (f"{a} owes {b} 50 euros", f"{b} owes {a} 50 euros"),
        ):
            at += STEP
            writes.append(Write(user, statement, at, "swap"))
            at += STEP
            writes.append(Write(user, swapped, at, "swap"))
            swaps.append((user, statement, swapped))
        # Echoes: the block's facts handed back as if new (no recall-loop guard here).
        for content in rng.sample(sorted(current.values()), 3):
            at += STEP
            writes.append(Write(user, content, at, "echo"))
        end = max(end, at)
    return Stream(writes, timeline, swaps, end + STEP)


@dataclasses.dataclass
class Result:
    name: str
    writes: int = 0
    refreshed: int = 0
    created: int = 0
    superseded: int = 0
    wrong_folds: int = 0  # a new value folded into another value (the fact lost)
    restatements: int = 0
    restatements_refreshed: int = 0
    echoes: int = 0
    echoes_added: int = 0
    swaps_kept: int = 0
    swaps: int = 0
    now_queries: int = 0
    now_current: int = 0
    now_stale: int = 0
    at_queries: int = 0
    at_valid: int = 0
    at_other: int = 0
    live_conflicts: int = 0  # live memories beyond one per attribute
    live_duplicates: int = 0  # live memories stating a value another live one states
    block_echoes: int = 0  # facts in the recalled blocks handed back in a conversation
    block_echoes_added: int = 0  # memories those conversations created


def ingest(service: Memory, stream: Stream, result: Result) -> None:
    for write in stream.writes:
        stored = service.add(
            [NewMemory(content=write.content, created_at=write.at)], user_id=write.user_id, source="bench"
        )
        fact = stored.facts[0]
        result.writes += 1
        result.superseded += len(fact.superseded)
        if fact.action == "created":
            result.created += 1
        else:
            result.refreshed += 1
        if write.kind == "correction" and fact.action == "refreshed":
            result.wrong_folds += 1
        if write.kind == "restatement":
            result.restatements += 1
            result.restatements_refreshed += fact.action == "refreshed"
        if write.kind == "echo":
            result.echoes += 1
            result.echoes_added += fact.action == "created"


def _value_of(content: str, user_values: dict[str, str]) -> str | None:
    return user_values.get(content.casefold().rstrip("."))


def check(service: Memory, stream: Stream, result: Result, *, k: int) -> None:
    # Per user and attribute, each value's statement (casefolded) -> the value.
    texts: dict[tuple[str, str], dict[str, str]] = {}
    for write in stream.writes:
        if write.attribute is not None and write.value is not None:
            known = texts.setdefault((write.user_id, write.attribute), {})
            for text in (write.content, near_duplicate(write.content)):
                known[text.casefold().rstrip(".")] = write.value
    questions = {a.name: a.question for a in ATTRIBUTES}
    for (user, name), periods in stream.timeline.items():
        values = texts[(user, name)]
        current = periods[-1][0]
        found = service.recall(questions[name], user_id=user, limit=k, now=stream.end)
        seen = {v for m in found.memories if (v := _value_of(m.content, values)) is not None}
        result.now_queries += 1
        result.now_current += current in seen
        result.now_stale += bool(seen - {current})
        listed = service.list(user_id=user, limit=500)
        live = [v for m in listed.memories if (v := _value_of(m.content, values)) is not None]
        result.live_conflicts += max(0, len(live) - 1)
        result.live_duplicates += len(live) - len(set(live))
        for value, since, until in periods:
            middle = since + ((until or stream.end) - since) / 2
            found = service.recall(questions[name], user_id=user, limit=k, now=stream.end, as_of=middle)
            seen = {v for m in found.memories if (v := _value_of(m.content, values)) is not None}
            result.at_queries += 1
            result.at_valid += value in seen
            result.at_other += bool(seen - {value})
    for user, statement, swapped in stream.swaps:
        contents = {m.content for m in service.list(user_id=user, limit=500).memories}
        result.swaps += 1
        result.swaps_kept += statement in contents and swapped in contents


def echo_blocks(service: Memory, stream: Stream, result: Result) -> None:
    """Each user hands over a conversation whose user message pastes their recalled block."""
    for user in sorted({w.user_id for w in stream.writes}):
        recalled = service.recall("What do you know about the user?", user_id=user, limit=10, now=stream.end)
        before = len(service.list(user_id=user, limit=500).memories)
        service.ingest_conversation(
            ConversationEnded(
                user_id=user,
                conversation_id=f"echo-{user}",
                ended_at=stream.end,
                messages=[
                    ChatMessage(role="user", content=f"Here is what you told me:\n{recalled.prompt_block}"),
                    ChatMessage(role="assistant", content="Thanks, noted."),
                ],
            )
        )
        result.block_echoes += len(recalled.memories)
        result.block_echoes_added += len(service.list(user_id=user, limit=500).memories) - before


def near_duplicate(text: str) -> str:
    """The same fact with a word more: not the same text, so an import keeps both."""
    return text.rstrip(".") + ", as stated before"


def import_and_consolidate(service: Memory, stream: Stream, before: Result, after: Result) -> None:
    lines = [
        ImportLine(user_id=w.user_id, content=text, created_at=w.at)
        for w in stream.writes
        for text in ((w.content, near_duplicate(w.content)) if w.kind == "restatement" else (w.content,))
    ]
    service.import_(lines)
    before.writes = after.writes = len(lines)
    check(service, stream, before, k=1)
    report = service.admin.consolidate(threshold=CONSOLIDATE_THRESHOLD)
    say(report.summary())
    check(service, stream, after, k=1)


def _share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def run(service: Memory, args: argparse.Namespace) -> int:
    stream = generate(args.users, args.seed)
    kinds: dict[str, int] = {}
    for write in stream.writes:
        kinds[write.kind] = kinds.get(write.kind, 0) + 1
    say(f"{len(stream.writes)} writes for {args.users} users: " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    variants: Sequence[tuple[str, dict[str, Any]]] = (
        ("ours", {}),
        ("fold only (no same-attribute supersession)", {"same_attribute_threshold": 1.01}),
    )
    results: list[Result] = []
    with ScratchServer.from_args(args) as server:
        for index, (name, overrides) in enumerate(variants):
            url = server.new_database(f"truth{index}")
            bench = open_service(service.settings.model_copy(update=overrides), url, provider=args.embedder)
            try:
                result = Result(name)
                say(f"{name}: writing ({bench.admin.embedder.fingerprint})")
                ingest(bench, stream, result)
                say(f"{name}: recalling")
                check(bench, stream, result, k=args.k)
                if index == 0:
                    say(f"{name}: block echoes")
                    echo_blocks(bench, stream, result)
                    say(f"{name}: conversations, future valid times, edits, scopes, distinct look-alikes")
                    cases = truth_cases.run_cases(bench, args.users, args.seed)
                    say(f"{name}: deletes after edits, racing review decisions, as of with ended memories")
                    reviewing = service.settings.model_copy(update={**overrides, "review_writes": True})
                    containers = [open_service(reviewing, url, provider=args.embedder) for _ in range(RACERS)]
                    try:
                        deletes = truth_deletes.run_cases(bench, containers, args.users, args.seed)
                    finally:
                        for container in containers:
                            container.close()
                    say(f"{name}: adversarial inputs against ordinary ones")
                    timings = truth_cases.run_timings(bench, args.seed)
                    say(f"{name}: everyday corrections, ended events and controls, as people word them")
                    dev = truth_phrasings.run_phrasings(bench, truth_phrasings.DEVELOPMENT, label="dev")
                    held = truth_phrasings.run_phrasings(bench, truth_phrasings.HELD_OUT, label="held")
                    say(f"{name}: cascades and absences (MEME's dependency tasks)")
                    cascade = truth_cascade.run_cases(bench, args.users, args.seed)
                    for wrong in cascade.wrong:
                        say(f"cascade: wrong {wrong}")
                results.append(result)
            finally:
                bench.close()
    with ScratchServer.from_args(args) as server:
        url = server.new_database("truth-import")
        bench = open_service(service.settings, url, provider=args.embedder)
        imported, consolidated = Result("import, before consolidation"), Result("import, after consolidation")
        try:
            say("import: importing, then consolidating")
            import_and_consolidate(bench, stream, imported, consolidated)
        finally:
            bench.close()
    headers = [
        "variant",
        "writes",
        "created",
        "refreshed",
        "superseded",
        "wrong folds",
        "now: current",
        "now: stale",
        "at T: valid",
        "at T: other",
        "live conflicts",
        "restated->refresh",
        "swaps kept",
        "echoes added",
    ]
    rows = [
        [
            r.name,
            r.writes,
            r.created,
            r.refreshed,
            r.superseded,
            r.wrong_folds,
            f"{_share(r.now_current, r.now_queries):.3f}",
            f"{_share(r.now_stale, r.now_queries):.3f}",
            f"{_share(r.at_valid, r.at_queries):.3f}",
            f"{_share(r.at_other, r.at_queries):.3f}",
            r.live_conflicts,
            f"{_share(r.restatements_refreshed, r.restatements):.3f}",
            f"{_share(r.swaps_kept, r.swaps):.3f}",
            r.echoes_added,
        ]
        for r in results
    ]
    print(f"{len(stream.timeline)} attributes over {args.users} users; recall limit {args.k}")
    print_table(headers, rows)
    ours, fold = results
    ratio = truth_cases.Timings.ratio
    ratios = [
        ratio(timings.match_numbers, timings.match_ordinary),
        ratio(timings.consolidate_numbers, timings.consolidate_ordinary),
        ratio(timings.redact_digits, timings.redact_ordinary),
        ratio(timings.redact_emails, timings.redact_metadata),
        ratio(timings.recall_4000, 2 * timings.recall_2000),  # twice the input: up to twice the time
    ]
    print(
        f"issue 32 cases over {args.users} users each: in-conversation corrections "
        f"{cases.conversation_corrected}/{cases.conversations}, future replacements {cases.future_ok}/{cases.future}, "
        f"edits keeping the past {cases.edits_past_kept}/{cases.edits}, cross-scope one value "
        f"{cases.cross_scope_one_value}/{cases.cross_scope}, distinct look-alikes retired "
        f"{cases.distinct_retired}/{cases.distinct}, a project's correction of the user-wide age ending it "
        f"{cases.project_correction_ended}/{cases.project_corrections}"
    )
    print(
        f"issue 42 cases over {args.users} users each: deletes after edits and a correction leaving no text "
        f"{deletes.deletes_clean}/{deletes.deletes}, held writes decided at once from {RACERS} containers with "
        f"one outcome {deletes.decisions_one}/{deletes.decisions}, as-of reads with ended memories holding "
        f"only what was true then {deletes.as_of_only_then}/{deletes.as_of}"
    )
    print_table(
        ["adversarial input", "seconds", "ordinary input", "seconds", "ratio"],
        [
            [
                "5 number-heavy 2,000-char memories beside similar",
                f"{timings.match_numbers:.3f}",
                "ordinary words",
                f"{timings.match_ordinary:.3f}",
                f"{ratios[0]:.2f}",
            ],
            [
                "consolidate 24 number-heavy 2,000-char",
                f"{timings.consolidate_numbers:.3f}",
                "ordinary words",
                f"{timings.consolidate_ordinary:.3f}",
                f"{ratios[1]:.2f}",
            ],
            [
                "redact 2,000 chars of digit runs",
                f"{timings.redact_digits:.4f}",
                "2,000 chars of words",
                f"{timings.redact_ordinary:.4f}",
                f"{ratios[2]:.2f}",
            ],
            [
                "redact metadata of 200 e-mail addresses",
                f"{timings.redact_emails:.4f}",
                "metadata of 200 plain strings",
                f"{timings.redact_metadata:.4f}",
                f"{ratios[3]:.2f}",
            ],
            [
                "recall a 4,000-char query",
                f"{timings.recall_4000:.4f}",
                "2 x a 2,000-char query",
                f"{2 * timings.recall_2000:.4f}",
                f"{ratios[4]:.2f}",
            ],
        ],
    )
    print_table(
        ["phrasings (issue 42)", "door", "corrections", "events ended", "controls kept", "not extracted"],
        [
            [label, door, t.figure("correction"), t.figure("event"), t.figure("control"), t.unread]
            for label, tallies in (("development", dev), ("held out", held))
            for door, t in zip(("add", "conversation"), tallies, strict=True)
        ],
    )
    for label, tallies in (("development", dev), ("held out", held)):
        for door, t in zip(("add", "conversation"), tallies, strict=True):
            for wrong in t.wrong:
                say(f"{label} {door}: wrong {wrong}")
    print(
        f"issue 45 cases (MEME's Cascade and Absence) over {args.users} users: dependents stale and not presented "
        f"as current {cascade.cascade_correct}/{cascade.cascade}, absence said {cascade.absence_correct}/"
        f"{cascade.absence}, controls answered {cascade.controls_answered}/{cascade.controls}, new base values the "
        f"write path kept beside the old {cascade.base_kept}"
    )
    print(
        f"echoes: {ours.echoes} written back through POST /memories (must only refresh), "
        f"{ours.echoes_added} added; block echoes: {ours.block_echoes} recalled facts pasted back in a "
        f"conversation, {ours.block_echoes_added} memories added"
    )
    print(
        f"import with near duplicates: {imported.writes} lines; true duplicates per 100 writes "
        f"{100 * _share(imported.live_duplicates, imported.writes):.2f} before consolidation, "
        f"{100 * _share(consolidated.live_duplicates, consolidated.writes):.2f} after"
    )
    print(
        f"truth users={args.users} writes={ours.writes} now_current={_share(ours.now_current, ours.now_queries):.3f} "
        f"now_stale={_share(ours.now_stale, ours.now_queries):.3f} "
        f"at_valid={_share(ours.at_valid, ours.at_queries):.3f} at_other={_share(ours.at_other, ours.at_queries):.3f} "
        f"wrong_folds={ours.wrong_folds} superseded={ours.superseded} "
        f"dup_per_100={100 * _share(ours.live_conflicts, ours.writes):.2f} "
        f"restated_refreshed={_share(ours.restatements_refreshed, ours.restatements):.3f} "
        f"swaps_kept={_share(ours.swaps_kept, ours.swaps):.3f} echoes={ours.echoes} echoes_added={ours.echoes_added} "
        f"fold_only_now_stale={_share(fold.now_stale, fold.now_queries):.3f} "
        f"fold_only_dup_per_100={100 * _share(fold.live_conflicts, fold.writes):.2f} "
        f"block_echoes={ours.block_echoes} block_echoes_added={ours.block_echoes_added} "
        f"import_dup_per_100={100 * _share(imported.live_duplicates, imported.writes):.2f} "
        f"consolidated_dup_per_100={100 * _share(consolidated.live_duplicates, consolidated.writes):.2f} "
        f"conv_corrected={_share(cases.conversation_corrected, cases.conversations):.3f} "
        f"future_ok={_share(cases.future_ok, cases.future):.3f} "
        f"edit_past_kept={_share(cases.edits_past_kept, cases.edits):.3f} "
        f"cross_scope_one_value={_share(cases.cross_scope_one_value, cases.cross_scope):.3f} "
        f"distinct_facts={cases.distinct} distinct_retired={cases.distinct_retired} "
        f"match_numbers_s={timings.match_numbers:.3f} match_ordinary_s={timings.match_ordinary:.3f} "
        f"consolidate_numbers_s={timings.consolidate_numbers:.3f} "
        f"consolidate_ordinary_s={timings.consolidate_ordinary:.3f} "
        f"redact_digits_s={timings.redact_digits:.4f} redact_emails_s={timings.redact_emails:.4f} "
        f"redact_ordinary_s={timings.redact_ordinary:.4f} redact_metadata_s={timings.redact_metadata:.4f} "
        f"recall_4000_s={timings.recall_4000:.4f} recall_2000_s={timings.recall_2000:.4f} "
        f"adversarial_max_ratio={max(ratios):.2f} "
        f"deletes_after_edits={deletes.deletes} "
        f"delete_after_edit_clean={_share(deletes.deletes_clean, deletes.deletes):.3f} "
        f"racing_decisions={deletes.decisions} "
        f"racing_decisions_one_outcome={_share(deletes.decisions_one, deletes.decisions):.3f} "
        f"as_of_inactive_only_then={_share(deletes.as_of_only_then, deletes.as_of):.3f} "
        f"first_person_corrected={dev[0].share('correction'):.3f} events_ended={dev[0].share('event'):.3f} "
        f"first_person_controls_kept={dev[0].share('control'):.3f} "
        f"conv_first_person_corrected={dev[1].share('correction'):.3f} "
        f"conv_events_ended={dev[1].share('event'):.3f} conv_first_person_controls_kept={dev[1].share('control'):.3f} "
        f"held_out_corrected={held[0].share('correction'):.3f} held_out_events_ended={held[0].share('event'):.3f} "
        f"held_out_controls_kept={held[0].share('control'):.3f} "
        f"conv_held_out_corrected={held[1].share('correction'):.3f} "
        f"conv_held_out_controls_kept={held[1].share('control'):.3f} "
        f"project_correction_ended={_share(cases.project_correction_ended, cases.project_corrections):.3f} "
        f"cascade_cases={cascade.cascade} cascade_correct={_share(cascade.cascade_correct, cascade.cascade):.3f} "
        f"absence_cases={cascade.absence} absence_correct={_share(cascade.absence_correct, cascade.absence):.3f} "
        f"absence_controls={cascade.controls} "
        f"absence_controls_answered={_share(cascade.controls_answered, cascade.controls):.3f} "
        f"cascade_base_kept={cascade.base_kept}"
    )
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "truth",
        help="facts over time: corrections supersede, 'now' recalls the current value, 'as of T' the one valid then",
        description="Write a generated stream of facts, corrections, restatements, role swaps and block echoes "
        "through the write path, then recall every attribute now and as of a time inside each value's validity.",
    )
    p.add_argument("--users", type=int, default=20, help="generated users (default 20)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--k", type=int, default=5, help="memories recalled per question (default 5)")
    p.add_argument("--embedder", choices=["local", "hash"], default="local", help="local = all-MiniLM-L6-v2 (default)")
    add_database_arguments(p)
    p.set_defaults(func=run)
