"""What people say is kept right without flags (issue 42): a first-person correction supersedes
the fact it corrects, a move or a stop ends the state it names, an ended event is given its end,
and a fact about another person (a friend's, a colleague's) never supersedes the user's; through
``Memory.add``, the HTTP handler, MCP ``remember``, ``rushmem add`` and conversations, with
default arguments and the default local model (the thresholds are calibrated on it)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import anyio
import pytest
from mcp import Client

from rushmem.config import Settings
from rushmem.mcp.tools import Identity, MemoryTools, build_server, fixed_identity
from rushmem.service import Memory
from rushmem_contract.models import ChatMessage, ConversationEnded, ImportLine, MemoryRecord, NewMemory
from rushmem_tools.cli import main
from tests.support.recall import body_of, invoke, with_body

USER = "first-person-user"


@pytest.fixture
def local(monkeypatch: pytest.MonkeyPatch, blank_database_url: str) -> Settings:
    """A database of the local model's vectors, for the service and the handlers alike."""
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", blank_database_url)
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "local")
    return Settings(database_url=blank_database_url, embedding_provider="local")


@pytest.fixture
def service(local: Settings) -> Any:
    svc = Memory(local)
    yield svc
    svc.close()


def everything(service: Memory, user: str = USER) -> dict[str, MemoryRecord]:
    return {m.content: m for m in service.list(user_id=user, include_inactive=True, limit=100).memories}


def current(service: Memory, user: str = USER) -> set[str]:
    return {m.content for m in service.list(user_id=user, limit=100).memories}


# ---- Memory.add ----------------------------------------------------------------------------------


def test_a_move_said_in_the_first_person_supersedes_where_the_user_lived(service: Memory) -> None:
    """The issue's case: before, the move superseded nothing and the block held both cities."""
    service.add(NewMemory(content="I live in Berlin"), user_id=USER)
    moved = service.add(NewMemory(content="I moved from Berlin to Munich"), user_id=USER)
    assert moved.superseded == 1
    block = service.recall("Where does the user live?", user_id=USER).prompt_block
    assert "I moved from Berlin to Munich" in block and "I live in Berlin" not in block
    old = everything(service)["I live in Berlin"]
    assert old.valid_until is not None and old.superseded_by == moved.ids[0]


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("I'm 31 years old", "I'm 32 years old"),
        ("The user lives in Berlin", "I live in Munich now"),
        ("My favourite colour is blue", "My favourite colour is green these days"),
        ("I smoke", "I quit smoking"),
        ("I have a boyfriend named Tom", "I broke up with Tom"),
        ("I'm vegetarian", "I'm not vegetarian anymore"),
        ("I use Vim for coding", "I switched from Vim to Emacs"),
        ("I work as a nurse", "I work as a teacher now"),
    ],
)
def test_a_correction_as_people_word_it_supersedes_with_default_arguments(
    service: Memory, earlier: str, later: str
) -> None:
    service.add(NewMemory(content=earlier), user_id=USER)
    assert service.add(NewMemory(content=later), user_id=USER).superseded == 1
    assert current(service) == {later}


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        ("The birthday of the user's friend Ana is on 3 May", "The birthday of the user's friend Rita is on 3 May"),
        ("I live in Berlin", "My colleague lives in Paris"),
        ("My sister lives in Rome", "I live in Milan"),
        ("I live in Berlin", "I might move to Munich next year"),
        ("I have a cat named Luna", "I also have a cat named Milo"),
        ("I speak English", "I speak Spanish too"),
    ],
)
def test_another_persons_fact_a_plan_or_an_addition_supersedes_nothing(
    service: Memory, earlier: str, later: str
) -> None:
    service.add(NewMemory(content=earlier), user_id=USER)
    assert service.add(NewMemory(content=later), user_id=USER).superseded == 0
    assert current(service) == {earlier, later}


def test_a_statement_in_the_first_person_refreshes_its_third_person_form(service: Memory) -> None:
    first = service.add(NewMemory(content="The user lives in Berlin."), user_id=USER)
    again = service.add(NewMemory(content="I live in Berlin"), user_id=USER)
    assert again.refreshed == 1 and again.ids == first.ids and current(service) == {"The user lives in Berlin."}


# ---- HTTP, MCP, the CLI --------------------------------------------------------------------------


def test_http_post_memories_supersedes_on_a_first_person_move(local: Settings) -> None:
    def post(content: str) -> dict[str, Any]:
        result = invoke(with_body("http-memories-add.json", {"user_id": USER, "memories": [{"content": content}]}))
        assert result["statusCode"] == 201, result
        return dict(body_of(result))

    first = post("I live in Berlin")
    moved = post("I moved from Berlin to Munich")
    assert moved["facts"][0]["superseded"] == first["ids"]
    recalled = invoke(with_body("http-recall-iam.json", {"user_id": USER, "query": "Where does the user live?"}))
    assert recalled["statusCode"] == 200, recalled
    block = body_of(recalled)["prompt_block"]
    assert "I moved from Berlin to Munich" in block and "I live in Berlin" not in block


def test_mcp_remember_supersedes_an_age_said_in_the_first_person(service: Memory) -> None:
    server = build_server(MemoryTools(lambda: service, fixed_identity(Identity(USER))))

    async def scenario() -> tuple[Any, Any]:
        async with Client(server) as client:
            first = await client.call_tool("remember", {"memories": ["The user is 40 years old"]})
            later = await client.call_tool("remember", {"memories": ["I'm 41"]})
            return first.structured_content, later.structured_content

    first, later = anyio.run(scenario)
    assert later["facts"][0]["superseded"] == first["ids"]
    assert current(service) == {"I'm 41"}


def test_cli_add_supersedes_a_pets_name_corrected_with_actually(
    local: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["add", "--user", USER, "My dog's name is Rex"], settings=local) == 0
    old = json.loads(capsys.readouterr().out)["ids"][0]
    assert main(["add", "--user", USER, "Actually my dog's name is Max"], settings=local) == 0
    assert json.loads(capsys.readouterr().out)["facts"][0]["superseded"] == [old]


# ---- conversations -------------------------------------------------------------------------------


def say(service: Memory, text: str, at: dt.datetime, conversation: str) -> list[str]:
    message = ChatMessage(role="user", content=text, created_at=at)
    outcome = service.ingest_conversation(
        ConversationEnded(user_id=USER, conversation_id=conversation, ended_at=at, messages=[message])
    )
    return [str(i) for i in outcome.ids]


def test_a_move_ends_the_earlier_move_event_and_the_state_it_began(service: Memory) -> None:
    """The issue's case: before, "The user moved to Berlin." stayed current beside "The user lives
    in Munich." for the same question. The ended event gets its end (the later message's time)."""
    march = dt.datetime.now(dt.UTC) - dt.timedelta(days=90)
    june = march + dt.timedelta(days=60)
    say(service, "I moved to Berlin", march, "c1")
    say(service, "I live in Munich now", june, "c2")
    rows = everything(service)
    assert current(service) == {"The user lives in Munich now."}
    for ended in ("The user moved to Berlin.", "The user lives in Berlin."):
        assert rows[ended].valid_until == june, ended
    block = service.recall("Where does the user live?", user_id=USER).prompt_block
    assert "Berlin" not in block and "Munich" in block


def test_a_stop_said_in_a_conversation_ends_the_habit(service: Memory) -> None:
    now = dt.datetime.now(dt.UTC)
    say(service, "I smoke", now - dt.timedelta(days=10), "c1")
    say(service, "I quit smoking", now, "c2")
    assert current(service) == {"The user quit smoking."}


def test_the_block_shows_a_past_events_time_and_never_an_ended_fact_as_current(service: Memory) -> None:
    """Issue 42 item 2: recalled with superseded memories, the move the user made and the city they
    left are shown with their time, never as the current state; before, both read as current."""
    march = dt.datetime(2026, 3, 1, 9, tzinfo=dt.UTC)
    say(service, "I moved to Berlin", march, "c1")
    say(service, "I live in Munich now", march + dt.timedelta(days=60), "c2")
    block = service.recall("Where does the user live?", user_id=USER, include_inactive=True).prompt_block
    lines = {line.split(". ", 1)[1] for line in block.splitlines() if line[:1].isdigit()}
    ended = {line for line in lines if "Berlin" in line}
    assert ended and all(line.endswith("(no longer current since 2026-04-30)") for line in ended), lines
    assert "The user lives in Munich now." in lines
    service.add(NewMemory(content="I visited Rome", valid_from=march), user_id=USER)
    block = service.recall("Which cities did the user visit?", user_id=USER).prompt_block
    assert "I visited Rome (2026-03-01)" in block


# ---- a project's correction of the user's own state (item 6) -----------------------------------------


def listed(service: Memory, project: str | None = None) -> set[str]:
    return {m.content for m in service.list(user_id=USER, project_id=project, limit=100).memories}


def test_a_project_correction_of_where_the_user_lives_ends_the_user_wide_value_on_write(service: Memory) -> None:
    """Before: the move in project p superseded nothing (the write never met the user-wide fact), so
    p's list, the user-wide list and every other project still held Berlin as current."""
    first = service.add(NewMemory(content="I live in Berlin"), user_id=USER)
    moved = service.add(NewMemory(content="I moved from Berlin to Munich"), user_id=USER, project_id="p")
    assert moved.facts[0].superseded == first.ids
    old = everything(service)["I live in Berlin"]
    assert old.valid_until is not None and old.superseded_by == moved.ids[0]
    assert listed(service, "p") == {"I moved from Berlin to Munich"}
    # The user lives in one place: no project presents Berlin as current any more, and the new value
    # stays in the project it was said in.
    assert "I live in Berlin" not in listed(service)
    assert listed(service, "q") == set()
    assert "Berlin" not in service.recall("Where does the user live?", user_id=USER, project_id="q").prompt_block


def test_a_project_value_of_something_of_the_users_leaves_the_user_wide_value_to_other_projects(
    service: Memory,
) -> None:
    """The control: "the user's team" may be another team in each project; resolved in p's recall."""
    service.add(NewMemory(content="The user's team is 4 people"), user_id=USER)
    five = service.add(NewMemory(content="The user's team is 5 people"), user_id=USER, project_id="p")
    assert five.facts[0].superseded == []
    assert listed(service, "q") == {"The user's team is 4 people"}
    block = service.recall("How big is the user's team?", user_id=USER, project_id="p").prompt_block
    assert "5 people" in block and "4 people" not in block


def test_http_post_memories_in_a_project_ends_the_user_wide_age(local: Settings) -> None:
    def post(content: str, **scope: str) -> dict[str, Any]:
        body = {"user_id": USER, "memories": [{"content": content}], **scope}
        result = invoke(with_body("http-memories-add.json", body))
        assert result["statusCode"] == 201, result
        return dict(body_of(result))

    first = post("The user is 31 years old")
    later = post("I'm 32", project_id="p")
    assert later["facts"][0]["superseded"] == first["ids"]


def test_cli_add_in_a_project_ends_the_user_wide_employer(local: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["add", "--user", USER, "I work as a nurse"], settings=local) == 0
    old = json.loads(capsys.readouterr().out)["ids"][0]
    assert main(["add", "--user", USER, "--project", "p", "I work as a teacher now"], settings=local) == 0
    assert json.loads(capsys.readouterr().out)["facts"][0]["superseded"] == [old]


def test_a_conversation_in_a_project_ends_the_user_wide_home_it_corrects(service: Memory) -> None:
    now = dt.datetime.now(dt.UTC)
    first = service.add(NewMemory(content="I live in Berlin", valid_from=now - dt.timedelta(days=30)), user_id=USER)
    message = ChatMessage(role="user", content="I live in Munich now", created_at=now)
    service.ingest_conversation(
        ConversationEnded(user_id=USER, project_id="p", conversation_id="c1", ended_at=now, messages=[message])
    )
    old = everything(service)["I live in Berlin"]
    assert old.valid_until == now and old.superseded_by is not None and old.id == first.ids[0]
    assert listed(service, "q") == set()


# ---- import --------------------------------------------------------------------------------------


def test_an_import_of_a_first_person_line_then_its_correction_is_resolved_by_consolidation(service: Memory) -> None:
    """Item 1 at the import door. An import is taken as given (an export restores as it was), so
    the correction is resolved by consolidation, which reads the first person as the third."""
    t0 = dt.datetime(2026, 1, 5, 9, tzinfo=dt.UTC)
    lines = [
        ImportLine(user_id=USER, content="I live in Berlin", created_at=t0),
        ImportLine(user_id=USER, content="I moved from Berlin to Munich", created_at=t0 + dt.timedelta(days=30)),
        ImportLine(user_id=USER, content="My friend Ana lives in Paris", created_at=t0 + dt.timedelta(days=31)),
    ]
    service.import_(lines)
    service.admin.consolidate(restart=True)
    assert current(service) == {"I moved from Berlin to Munich", "My friend Ana lives in Paris"}
    assert everything(service)["I live in Berlin"].valid_until is not None
