"""The in-process Python API: ``from rushmem import Memory`` on the embedded default (the
environment's settings: an embedded PostgreSQL under RUSHMEM_DATA_DIR), in four lines."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import rushmem
from rushmem import Admin, Memory
from rushmem.config import Settings
from rushmem_contract.errors import InvalidInput, NotFound
from rushmem_contract.models import ConversationEnded, MemoryChanges, MemoryRecord

# Each public member is a decision: a new one must be added here on purpose.
MEMORY_MEMBERS = {
    "settings",
    "admin",
    "cells",  # where each user's memories are (one database, or the cells)
    "OPTIONS",  # the in-process options a method takes besides the request's fields
    "invoke",  # run one operation of the table for a caller
    # The operations of the table (rushmem_contract.methods), mem0's words included.
    "add",
    "recall",
    "search",
    "get",
    "list",
    "get_all",
    "history",
    "export",
    "update",
    "delete",
    "forget_user",
    "delete_all",
    "erasure",
    "erasures",
    "usage",
    "users",
    "pending",
    "review",
    "ingest_conversation",
    "set_instructions",
    "get_instructions",
    "instructions_history",
    # Work over many users, each part in its user's cell.
    "ingest_batch",
    "import_",
    "recall_batch",
    "move_user",
    "cell_of",
    "cell_admins",
    "close",
}
ADMIN_MEMBERS = {
    "settings",
    "flush_usage",  # usage counted in the container written now (a reader's recalls)
    "bedrock_models",  # each configured Bedrock model's lifecycle (MigrateFunction, smoke --stack)
    "embedder",
    "extractor",
    "reranker",
    "db",
    "reads",
    "recall_plan",
    "reader_fallbacks",
    "rerank_fallbacks",
    "release_secrets",
    "migrate",
    "reapply_erasures",  # the erasure ledger on a restored database (`rushmem serve` before it answers)
    "reembed",
    "drop_previous_vectors",
    "refresh_dense_users",
    "consolidate",
    "purge",
    "import_jsonl",
    "similarities",
    "usage_by_user",
    "drain_events",
    "events_status",
}


def public(obj: object) -> set[str]:
    return {name for name in dir(obj) if not name.startswith("_")}


@pytest.fixture
def embedded_default(monkeypatch: pytest.MonkeyPatch, embedded_dir: Path) -> Path:
    """The environment of a first-time user: nothing set but where the embedded server lives
    (and the hash embedder, for speed)."""
    monkeypatch.setenv("RUSHMEM_DATA_DIR", str(embedded_dir))
    monkeypatch.setenv("RUSHMEM_EMBEDDING_PROVIDER", "hash")
    return embedded_dir


def test_memory_and_admin_have_exactly_the_intended_public_members() -> None:
    assert public(Memory) | {"settings", "admin", "cells"} == MEMORY_MEMBERS
    assert public(Admin) == ADMIN_MEMBERS
    assert rushmem.Memory is Memory and rushmem.Admin is Admin
    with pytest.raises(AttributeError):
        _ = rushmem.MemoryService  # type: ignore[attr-defined]


def test_the_four_lines_store_and_recall_on_the_embedded_default(embedded_default: Path) -> None:
    m = Memory()
    try:
        m.add("The user prefers TypeScript", user_id="u-42")
        block = m.recall("Which language should I use?", user_id="u-42").prompt_block
    finally:
        m.close()
    assert "The user prefers TypeScript" in block
    assert (embedded_default / "PG_VERSION").exists()  # the embedded server's own data directory


def test_the_verbs_read_edit_and_forget_what_add_stored(embedded_default: Path) -> None:
    with Memory() as m:
        assert set(public(m)) == MEMORY_MEMBERS
        (memory_id,) = m.add("Uses vim", user_id="u-1").ids
        m.add(["Uses tmux", "Lives in Lyon"], user_id="u-2")
        got = m.get(memory_id, user_id="u-1")
        assert isinstance(got, MemoryRecord) and got.content == "Uses vim"
        with pytest.raises(NotFound):
            m.get(memory_id, user_id="u-2")  # another user's id is no memory at all
        assert m.update(memory_id, MemoryChanges(content="Uses neovim"), user_id="u-1").content == "Uses neovim"
        assert [e.event for e in m.history(memory_id, user_id="u-1").events] == ["created", "updated"]
        assert [r.content for r in m.list(user_id="u-1").memories] == ["Uses neovim"]
        exported = m.export(user_id="u-1").lines
        m.delete(memory_id, user_id="u-1")
        with pytest.raises(NotFound):  # gone
            m.delete(memory_id, user_id="u-1")
        # The export restores it with its id, and the version its edit kept (the delete took both).
        assert len(exported) == 2 and m.import_(exported).created == 2
        assert m.get(memory_id, user_id="u-1").content == "Uses neovim"
        outcome = m.ingest_conversation(
            ConversationEnded(user_id="u-1", conversation_id="c-1", memories=[{"content": "Prefers dark mode"}])
        )
        assert outcome.status == "stored"
        receipt = m.forget_user("u-2")
        assert m.list(user_id="u-2").memories == [] and m.erasures("u-2").receipts == [receipt]
        assert {r.content for r in m.list(user_id="u-1").memories} == {"Uses neovim", "Prefers dark mode"}


def test_keyword_overrides_change_the_environments_settings(embedded_default: Path) -> None:
    m = Memory(default_limit=1)
    assert m.settings.default_limit == 1 and m.settings.data_dir == embedded_default
    assert Memory(m.settings, max_query_chars=100).settings.max_query_chars == 100
    with pytest.raises(TypeError, match="embedding_provder"):
        Memory(embedding_provder="hash")  # a typo is refused, not ignored
    assert inspect.signature(Memory.add).parameters["user_id"].kind is inspect.Parameter.KEYWORD_ONLY


def test_the_four_lines_run_in_a_fresh_interpreter(embedded_dir: Path) -> None:
    """What a reader of the README pastes: a new process, the package importable, nothing else set."""
    code = (
        "from rushmem import Memory; m = Memory(); "
        "m.add('The user prefers TypeScript', user_id='u-42'); "
        "print(m.recall('Which language should I use?', user_id='u-42').prompt_block)"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUSHMEM_", "AGENT_MEMORY_"))}
    env |= {"RUSHMEM_DATA_DIR": str(embedded_dir), "RUSHMEM_EMBEDDING_PROVIDER": "hash"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "The user prefers TypeScript" in done.stdout


@pytest.mark.model
def test_the_four_lines_with_the_default_local_model(monkeypatch: pytest.MonkeyPatch, embedded_dir: Path) -> None:
    """Nothing but the data directory set: the default embedder, the real local model."""
    monkeypatch.setenv("RUSHMEM_DATA_DIR", str(embedded_dir))
    with Memory() as m:
        assert m.settings.embedding_provider == "local"
        m.add("The user prefers TypeScript", user_id="u-42")
        m.add("The user's cat is called Miso", user_id="u-42")
        found = m.recall("Which programming language should I use?", user_id="u-42", limit=1)
    assert [r.content for r in found.memories] == ["The user prefers TypeScript"]
    assert uuid.UUID(str(found.memories[0].id))


def test_a_mem0_user_s_calls_by_id_need_no_user(service: Memory, app_login_url: str) -> None:
    """mem0's get(id), update(id, data), history(id) and delete(id) name no user (issue 43): the
    operator's Memory finds the owner of the id; a connection that cannot look across users (the
    stack's) asks for user_id, as before."""
    tea, paris = service.add(["Prefers tea", "Lives in Paris"], user_id="alice").ids
    rome = service.add("Lives in Rome", user_id="bob").ids[0]
    found = service.search("where does the user live", user_id="alice", limit=1).memories
    assert [m.content for m in found] == ["Lives in Paris"]
    assert {m.content for m in service.get_all(user_id="alice").memories} == {"Prefers tea", "Lives in Paris"}

    assert service.get(rome).user_id == "bob"
    changed = service.update(paris, "Lives in Lyon")
    assert (changed.user_id, changed.content) == ("alice", "Lives in Lyon")
    assert [e.event for e in service.history(paris).events] == ["created", "updated"]
    service.delete(paris)
    assert [m.id for m in service.get_all(user_id="alice").memories] == [tea]
    assert service.get(rome).content == "Lives in Rome"  # the other user's, untouched
    with pytest.raises(NotFound):
        service.get(paris)
    with pytest.raises(NotFound):
        service.history(uuid.uuid4())
    with pytest.raises(NotFound):  # a named user still scopes the call: not alice's
        service.get(rome, user_id="alice")

    with (
        Memory(Settings(database_url=app_login_url, embedding_provider="hash")) as app,
        pytest.raises(InvalidInput) as refused,
    ):
        app.get(rome)
    assert refused.value.field == "user_id"


def test_a_mem0_user_s_calls_work(service: Memory) -> None:
    """mem0's add(messages, user_id=, metadata=, infer=) and update(id, content=, user_id=), issue 35."""
    chat = [
        {"role": "user", "content": "Hi! I'm vegan. My stack is TypeScript."},
        {"role": "assistant", "content": "Noted."},
    ]
    extracted = service.add(chat, user_id="a", metadata={"app": "chat"})
    stored = {m.content: m for m in service.list(user_id="a").memories}
    assert set(stored) == {"The user is vegan.", "The user's stack is TypeScript."}
    assert set(extracted.ids) == {m.id for m in stored.values()} and extracted.created == 2
    assert all(
        m.metadata["app"] == "chat" and m.metadata["extracted_by"] == "rules:heuristic-v1" for m in stored.values()
    )
    assert service.add(chat, user_id="a").ids == []  # the same conversation again: nothing new
    assert service.add({"role": "user", "content": "hi"}, user_id="a").created == 0  # one message, nothing to keep

    raw = service.add(chat, user_id="b", infer=False, metadata={"app": "chat"})
    assert [service.get(i, user_id="b").content for i in raw.ids] == [m["content"] for m in chat]
    assert service.get(raw.ids[1], user_id="b").metadata == {"app": "chat", "role": "assistant"}
    inferred = service.add("I always use tabs, never spaces.", user_id="c", infer=True)
    assert [service.get(i, user_id="c").content for i in inferred.ids] == ["The user always uses tabs, never spaces."]

    fact = service.add("Prefers tea", user_id="a", metadata={"team": "web"}).ids[0]
    assert service.get(fact, user_id="a").metadata == {"team": "web"}
    updated = service.update(fact, content="Prefers green tea", user_id="a")
    assert updated.content == "Prefers green tea" and updated.metadata == {"team": "web"}
    assert service.update(str(fact), metadata=None, user_id="a").metadata == {}
    with pytest.raises(InvalidInput) as refused:
        service.update(fact, category="colour", user_id="a")
    assert refused.value.field == "category"
    with pytest.raises(InvalidInput) as mixed:
        service.add(["a fact", {"role": "user", "content": "hi"}], user_id="a")
    assert mixed.value.field == "memories[1]"
    with pytest.raises(InvalidInput) as bad_role:
        service.add([{"role": "robot", "content": "hi"}], user_id="a")
    assert bad_role.value.field == "messages[0].role"  # chat messages given as memories are messages
