"""`bench truth`'s cases of issue 45, shaped like MEME's dependency tasks (arXiv 2605.12477; what we
could read of it is its abstract and task list, not its episodes: docs/recall-quality.md, "MEME's
task types"), each on a user of its own.

Cascade: a base fact (where the user lives, works, what they drive, their child's school) and facts
that follow from it, stored with ``depends_on``; then the base changes (a correction naming it, or
the write path's same-fact rule seeing a new value) or is deleted. Right when every dependent is
marked stale and a question about each, worded unlike the stored text, does not get the stale value
in its block as current. Absence: the same questions; right when the block says in its one line that
nothing current answers. Controls: a question the new base value answers; right when the block holds
it and no absence line (the line must not be said where a current memory answers).
"""

from __future__ import annotations

import dataclasses
import random

from rushmem.recall.stale import ABSENCE_LINE, STALE_NOTE
from rushmem.service import Memory
from rushmem_contract.models import NewMemory


@dataclasses.dataclass(frozen=True)
class Chain:
    """A base fact with two values, what follows from the first one (each with a question worded
    unlike it), and a question the base answers."""

    base: str  # "{v}": the value
    values: tuple[str, ...]
    dependents: tuple[tuple[str, str], ...]  # (the fact, "{v}": the first value; a question about it)
    control: str  # a question the new base value answers


CHAINS = (
    Chain(
        "The user lives in {v}.",
        ("Berlin", "Lisbon", "Oslo", "Vienna", "Porto", "Madrid"),
        (
            ("The user's gym is the climbing hall near their flat in {v}.", "Where does the user go bouldering?"),
            ("The user commutes by tram to the office in central {v}.", "How does the user get to work?"),
            ("The user's dentist is Dr. Weber's practice in {v}.", "Who should the user see about a toothache?"),
        ),
        "Which city is the user's home?",
    ),
    Chain(
        "The user works at {v}.",
        ("Acme Corp", "Globex", "Initech", "Umbrella Labs", "Hooli"),
        (
            ("The user's manager at {v} is Priya.", "Who does the user report to?"),
            ("The user's work laptop is a ThinkPad issued by {v}.", "What computer does the user use for their job?"),
        ),
        "Which company employs the user?",
    ),
    Chain(
        "The user drives a {v}.",
        ("Volvo", "Tesla", "Fiat", "Skoda", "Mazda"),
        (
            ("The user's {v} is insured with Allianz.", "Which insurer covers the user's vehicle?"),
            ("The user parks the {v} in the garage on Elm Street.", "Where does the user leave the car at night?"),
        ),
        "What car does the user have?",
    ),
    Chain(
        "The user's son attends {v} school.",
        ("Riverside", "Hillcrest", "Oakwood", "Lakeside"),
        (
            ("The son's teacher at {v} is Mr. Novak.", "Who teaches the user's boy?"),
            ("The school bus to {v} leaves at 7:40.", "When must the boy be at the bus stop?"),
        ),
        "Which school does the user's son go to?",
    ),
)
FILLER = (
    "The user prefers TypeScript for new projects.",
    "The user is allergic to peanuts.",
    "The user plays the cello on weekends.",
    "The user's favourite film is Spirited Away.",
)
# How the base changes: a correction naming it, a new value the write path sees by itself, a delete.
CHANGES = ("supersedes", "new_value", "delete")


@dataclasses.dataclass
class Cases:
    cascade: int = 0
    cascade_correct: int = 0  # every dependent marked stale and no block presents its value as current
    absence: int = 0
    absence_correct: int = 0  # the block says nothing current answers, and not the stale value
    controls: int = 0
    controls_answered: int = 0  # the new value in the block, no absence line
    # A new value the write path kept beside the old one (a second car, a second school: its
    # same-fact rule does not retire the base), so nothing followed: counted here, not as a case.
    base_kept: int = 0
    wrong: list[str] = dataclasses.field(default_factory=list)


def run_cases(service: Memory, users: int, seed: int) -> Cases:
    rng = random.Random(seed)  # noqa: S311  (a reproducible stream, not a secret)
    cases = Cases()
    for u in range(users):
        chain = CHAINS[u % len(CHAINS)]
        change = CHANGES[(u // len(CHAINS)) % len(CHANGES)]
        old, new = rng.sample(chain.values, 2)
        user = f"case-cascade-{u:03d}"
        service.add(list(FILLER), user_id=user)
        (base,) = service.add([chain.base.format(v=old)], user_id=user).ids
        facts = [fact.format(v=old) for fact, _ in chain.dependents]
        dependents = service.add([NewMemory(content=f, depends_on=[base]) for f in facts], user_id=user).ids
        if change == "supersedes":
            service.add([NewMemory(content=chain.base.format(v=new), supersedes=[base])], user_id=user)
        elif change == "new_value":
            service.add([chain.base.format(v=new)], user_id=user)
        else:
            service.delete(base, user_id=user)
        if change == "new_value" and service.get(base, user_id=user).superseded_by is None:
            cases.base_kept += 1
            continue
        marked = all(service.get(d, user_id=user).stale_because == base for d in dependents)
        for fact, (_, question) in zip(facts, chain.dependents, strict=True):
            block = service.recall(question, user_id=user).prompt_block
            cases.cascade += 1
            if marked and fact not in block:
                cases.cascade_correct += 1
            else:
                cases.wrong.append(f"cascade ({change}) {question!r}: marked={marked}, block={block!r}")
            cases.absence += 1
            if (ABSENCE_LINE in block or STALE_NOTE in block) and fact not in block:
                cases.absence_correct += 1
            else:
                cases.wrong.append(f"absence ({change}) {question!r}: block={block!r}")
        if change != "delete":
            block = service.recall(chain.control, user_id=user).prompt_block
            cases.controls += 1
            if chain.base.format(v=new) in block and ABSENCE_LINE not in block:
                cases.controls_answered += 1
            else:
                cases.wrong.append(f"control ({change}) {chain.control!r}: block={block!r}")
    return cases
