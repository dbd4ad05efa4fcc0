"""Facts over time as people state them (issue 32), on the real embedded PostgreSQL: a correction
inside one conversation supersedes, with valid time at the later message; consolidation never
settles an unordered pair by a coin flip; "current" is "valid now" at every door; a content edit
never rewrites the past; one slot has one current value across user-wide and project scope."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client

from rushmem.mcp.tools import Identity, MemoryTools, build_server, fixed_identity
from rushmem.service import Memory, get_service
from rushmem_client import MemoryClient
from rushmem_contract.models import ChatMessage, ConversationEnded, ImportLine, MemoryChanges, NewMemory
from rushmem_tools.cli import main
from rushmem_tools.local import runtime as lambda_local
from tests.support.ingest import sqs_event, sqs_record
from tests.support.recall import TEMPLATE, body_of, invoke, serving, with_body, with_request

USER = "facts-user"
T0 = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.UTC)


def _said(*texts: str, start: dt.datetime = T0) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": text, "created_at": (start + dt.timedelta(minutes=5 * i)).isoformat()}
        for i, text in enumerate(texts)
    ]


def _current(service: Memory, user: str = USER, **kw: Any) -> list[str]:
    return sorted(m.content for m in service.list(user_id=user, **kw).memories)


# ---- 1. corrections inside one conversation --------------------------------------------------------


def test_a_correction_later_in_the_conversation_supersedes_the_earlier_value(lambda_env: str) -> None:
    """Before: both "is 6" and "is 7" were current, each dated at the conversation's end."""
    body = {
        "user_id": USER,
        "conversation_id": "c-daughter",
        "ended_at": (T0 + dt.timedelta(hours=1)).isoformat(),
        "messages": _said("My daughter is 6.", "She loves drawing horses.", "Actually, my daughter is 7."),
    }
    response = lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(sqs_record(body)))
    assert response == {"batchItemFailures": []}
    service = get_service()
    assert _current(service) == ["The user's daughter is 7."]
    # Valid time at the messages: 6 held from the first message until the correction.
    then = service.list(user_id=USER, as_of=T0 + dt.timedelta(minutes=5)).memories
    assert [m.content for m in then] == ["The user's daughter is 6."]
    assert then[0].valid_from == T0 and then[0].valid_until == T0 + dt.timedelta(minutes=10)
    recalled = service.recall("How old is the user's daughter?", user_id=USER)
    assert [m.content for m in recalled.memories] == ["The user's daughter is 7."]


def test_post_conversations_chains_corrections_of_a_stored_value(lambda_env: str) -> None:
    service = get_service()
    service.add("The user's daughter is 5.", user_id=USER, observed_at=T0 - dt.timedelta(days=400))
    body = {"user_id": USER, "messages": _said("My daughter is 6.", "No wait, my daughter is 7 now.")}
    result = invoke(with_body("http-conversation.json", body))
    assert result["statusCode"] == 200, result
    outcome = body_of(result)
    assert outcome["superseded"] == 2, outcome
    assert _current(service) == ["The user's daughter is 7 now."]
    # The chain as it was said: 5 until 6 was said, 6 until 7 was.
    assert _current(service, as_of=T0 - dt.timedelta(days=1)) == ["The user's daughter is 5."]
    assert _current(service, as_of=T0 + dt.timedelta(minutes=1)) == ["The user's daughter is 6."]


def test_without_message_times_the_later_message_still_wins(service: Memory) -> None:
    ended = T0 + dt.timedelta(hours=1)
    outcome = service.ingest_conversation(
        ConversationEnded(
            user_id=USER,
            ended_at=ended,
            messages=[
                ChatMessage(role="user", content="I live in Lisbon."),
                ChatMessage(role="user", content="Sorry, I live in Porto."),
            ],
        )
    )
    assert outcome.superseded == 1
    assert _current(service) == ["The user lives in Porto."]
    assert json.dumps(outcome.model_dump(mode="json"))  # the outcome still serialises


# ---- 2. consolidation orders by valid time, and leaves what it cannot order -------------------------


def test_consolidation_leaves_values_said_at_the_same_instant_and_orders_the_rest_by_valid_time(
    service: Memory,
) -> None:
    """Before: ordered by created_at then id, so equal times were settled by the uuids (a coin flip),
    and a value true earlier but stored later superseded the one true after it."""
    pairs = [
        (f"The user's child number {n} is 6 years old", f"The user's child number {n} is 7 years old")
        for n in range(1, 4)
    ]
    lines = [ImportLine(user_id=USER, content=t, created_at=T0) for pair in pairs for t in pair]
    # True from June, stated in January; true from March, stated in February: June's is current.
    lines += [
        ImportLine(user_id=USER, content="The user lives in Porto", created_at=T0, valid_from=T0.replace(month=6)),
        ImportLine(user_id=USER, content="The user lives in Lisbon", created_at=T0.replace(month=2), valid_from=T0),
    ]
    service.import_(lines)
    report = service.admin.consolidate(restart=True)
    assert report.superseded == 1, report
    assert _current(service) == sorted([t for pair in pairs for t in pair] + ["The user lives in Porto"])


# ---- 3. current means valid now, at every door ----------------------------------------------------


def test_a_replacement_valid_from_tomorrow_takes_over_tomorrow_at_every_door(lambda_env: str) -> None:
    """Before: the replacement was current at once, and the answer without as_of (Initech) was not
    the answer at as_of = now (Globex)."""
    service = get_service()
    now = dt.datetime.now(dt.UTC)
    old = service.add(
        NewMemory(content="The user works at Globex", valid_from=now - dt.timedelta(days=30)), user_id=USER
    ).ids[0]
    tomorrow = now + dt.timedelta(days=1)
    new = service.add(
        NewMemory(content="The user works at Initech", valid_from=tomorrow, supersedes=[old]), user_id=USER
    ).ids[0]
    at_now = _current(service, as_of=dt.datetime.now(dt.UTC))
    assert _current(service) == at_now == ["The user works at Globex"]
    query = "Where does the user work?"
    assert [m.id for m in service.recall(query, user_id=USER).memories] == [old]
    recalled = invoke(with_body("http-recall-iam.json", {"user_id": USER, "query": query}))
    assert [m["id"] for m in body_of(recalled)["memories"]] == [str(old)]
    listed = invoke(with_request("http-memories-list.json", "GET", "/memories", {"user_id": USER}))
    assert [m["id"] for m in body_of(listed)["memories"]] == [str(old)]
    # When its time comes, the replacement is current (evaluated then, or asked as of then).
    later = tomorrow + dt.timedelta(hours=1)
    assert [m.id for m in service.recall(query, user_id=USER, now=later).memories] == [new]
    assert _current(service, as_of=later) == ["The user works at Initech"]
    # The MCP tools read the same.
    server = build_server(MemoryTools(lambda: service, fixed_identity(Identity(USER))))

    async def scenario() -> Any:
        async with Client(server) as client:
            return await client.call_tool("recall_memories", {"query": query})

    result = anyio.run(scenario)
    assert "Globex" in str(result) and "Initech" not in str(result)


# ---- 4. a content edit never rewrites the past -------------------------------------------------------


@pytest.fixture
def served(lambda_env: str) -> Iterator[str]:
    with serving() as url:
        yield url


def test_a_content_edit_at_every_door_keeps_the_text_valid_before_it(served: str) -> None:
    """Before: PATCH, MCP update_memory, the CLI and the client changed the text in place, and as_of
    before the edit read the new text; no version of the old value was valid at any time."""
    service = get_service()
    since = dt.datetime.now(dt.UTC) - dt.timedelta(days=10)

    def stored(text: str, user: str) -> str:
        return str(service.add(NewMemory(content=text, valid_from=since), user_id=user).ids[0])

    def then(user: str) -> list[str]:
        return _current(service, user=user, as_of=before)

    ids = {
        door: stored(f"The user drives a Volvo ({door})", f"{USER}-{door}") for door in ("http", "mcp", "cli", "client")
    }
    before = dt.datetime.now(dt.UTC)
    patched = invoke(
        with_request("http-memory-update.json", "PATCH", f"/memories/{ids['http']}", {"user_id": f"{USER}-http"})
        | {"body": json.dumps({"content": "The user drives a Tesla (http)"})}
    )
    assert patched["statusCode"] == 200, patched
    server = build_server(MemoryTools(lambda: service, fixed_identity(Identity(f"{USER}-mcp"))))

    async def scenario() -> Any:
        async with Client(server) as client:
            return await client.call_tool(
                "update_memory", {"memory_id": ids["mcp"], "content": "The user drives a Tesla (mcp)"}
            )

    assert not anyio.run(scenario).is_error
    assert (
        main(["update", "--user", f"{USER}-cli", "--id", ids["cli"], "--content", "The user drives a Tesla (cli)"]) == 0
    )
    with MemoryClient(served, auth="none", timeout=30) as client:
        assert client.update(ids["client"], user_id=f"{USER}-client", content="The user drives a Tesla (client)").id
    for door in ("http", "mcp", "cli", "client"):
        user = f"{USER}-{door}"
        assert _current(service, user=user) == [f"The user drives a Tesla ({door})"], door
        assert then(user) == [f"The user drives a Volvo ({door})"], door
        assert str(service.list(user_id=user).memories[0].id) == ids[door]  # the memory keeps its id
    # A typo fix says so: changed in place, for the past too.
    typo = stored("The user drives a Volvp", USER)
    service.update(uuid.UUID(typo), MemoryChanges(content="The user drives a Volvo", typo_fix=True), user_id=USER)
    assert _current(service, as_of=before) == ["The user drives a Volvo"]
    # Back to an earlier text: the version folds into the memory (one row per fact in a scope).
    service.update(
        uuid.UUID(ids["http"]), MemoryChanges(content="The user drives a Volvo (http)"), user_id=f"{USER}-http"
    )
    assert _current(service, user=f"{USER}-http") == ["The user drives a Volvo (http)"]


# ---- 5. one current value per slot across user-wide and project scope ---------------------------------


def test_a_user_wide_correction_of_a_project_fact_leaves_one_value_in_the_projects_block(service: Memory) -> None:
    """Before: project p's block held both ages, the old one first."""
    service.add(NewMemory(content="The user is 31 years old", valid_from=T0), user_id=USER, project_id="p")
    service.add(NewMemory(content="The user is 32 years old", valid_from=T0.replace(month=6)), user_id=USER)
    service.add(NewMemory(content="The user's team is 4 people", valid_from=T0), user_id=USER)
    service.add(
        NewMemory(content="The user's team is 5 people", valid_from=T0.replace(month=6)), user_id=USER, project_id="p"
    )
    age = service.recall("How old is the user?", user_id=USER, project_id="p")
    assert [m.content for m in age.memories if "years old" in m.content] == ["The user is 32 years old"]
    team = service.recall("How big is the user's team?", user_id=USER, project_id="p")
    assert [m.content for m in team.memories if "team" in m.content] == ["The user's team is 5 people"]
    assert "31" not in age.prompt_block
    # A user-wide correction is one for every project: the project's old age is superseded on write,
    # so the project's list says one age too.
    listed = _current(service, project_id="p")
    assert [t for t in listed if "years old" in t] == ["The user is 32 years old"]
    # Each scope alone still holds what it was told; another project sees the user-wide values.
    other = service.recall("How big is the user's team?", user_id=USER, project_id="q")
    assert [m.content for m in other.memories if "team" in m.content] == ["The user's team is 4 people"]


# ---- 6. distinct facts that look alike stay apart ------------------------------------------------------

DISTINCT = [
    "The user has a yoga class on Monday at 6 pm",
    "The user has a yoga class on Wednesday at 6 pm",
    "The user takes the train to Porto on May 3",
    "The user takes the train from Porto on May 3",
    "The user's manager is Ana",
    "The user's former manager is Ana",
]


def test_distinct_facts_that_look_alike_survive_the_write_path_and_consolidation(service: Memory) -> None:
    """Before: the return train merged into the outward one, "former manager" folded into "manager",
    and Wednesday's class superseded Monday's."""
    for i, text in enumerate(DISTINCT):
        outcome = service.add(NewMemory(content=text, valid_from=T0 + dt.timedelta(days=i)), user_id=USER)
        assert outcome.facts[0].action == "created" and outcome.facts[0].superseded == [], text
    service.import_([ImportLine(user_id=f"{USER}-2", content=t, created_at=T0) for t in DISTINCT])
    report = service.admin.consolidate(restart=True, threshold=0.5)
    assert (report.merged, report.superseded) == (0, 0), report
    assert _current(service) == _current(service, user=f"{USER}-2") == sorted(DISTINCT)


# ---- 7. the rules extractor reads the common correction shapes -------------------------------------------


def test_the_rules_extractor_reads_corrections_across_conversations(service: Memory) -> None:
    """Before: the ages stored nothing, "now" blocked the update, the move, the contrast and "no
    longer" left the old facts current."""
    days = iter(range(1, 100))

    def talk(*texts: str) -> None:
        start = T0 + dt.timedelta(days=next(days))
        messages = [ChatMessage.model_validate(m) for m in _said(*texts, start=start)]
        service.ingest_conversation(ConversationEnded(user_id=USER, ended_at=start, messages=messages))

    talk("I'm 31.", "I work at Globex.", "I live in Lisbon.", "I use React.", "I drink coffee.")
    talk("I turned 32 last week.", "I work at Initech now.", "I moved from Lisbon to Porto.")
    talk("I use Svelte, not React.", "I no longer drink coffee.")
    assert _current(service) == sorted(
        [
            "The user is 32 years old.",
            "The user works at Initech now.",
            "The user moved from Lisbon to Porto.",
            "The user lives in Porto.",
            "The user uses Svelte.",
            "The user does not use React.",
            "The user no longer drinks coffee.",
        ]
    )
