"""Memories that travel: mem0's export in, Open Memory Specification grains out and back, a chat
export through extraction (docs/import-export.md), at the CLI door."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_contract.kinds import EXIT_OK, EXIT_PARTIAL, EXIT_USAGE
from rushmem_tools.cli import main
from rushmem_tools.formats import import_lines, mem0, oms
from tests.support.ingest import ChatServer, Reply, memories_answer

# mem0 OSS `Memory.get_all(user_id=...)` as mem0 serializes it (v1.1 output: {"results": [...]},
# times in the zone of the host that wrote them), plus a platform record with categories and an
# agent-scoped record naming no user. Written from mem0's documented shape, not copied data.
# A year after the run's day: an expiry the memory has not reached whenever the test runs.
EXPIRES = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=365)
MEM0_EXPORT = {
    "results": [
        {
            "id": "3f1c1e0a-5a2b-4c6e-9d6f-0b1a2c3d4e5f",
            "memory": "Is vegetarian and allergic to peanuts",
            "hash": "8f5e0c6d1b2a3948576a6b5c4d3e2f10",
            "metadata": {"channel": "web"},
            "created_at": "2025-03-14T09:26:53.589793-07:00",
            "updated_at": "2025-04-02T18:01:12.004211-07:00",
            "user_id": "alice",
        },
        {
            "id": "b7d4a6c2-1e3f-4a5b-8c9d-0e1f2a3b4c5d",
            "memory": "Prefers morning meetings and async communication",
            "hash": "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
            "metadata": None,
            "categories": ["user_preferences", "professional_details"],
            "created_at": "2025-05-20T11:00:00.000000-07:00",
            "updated_at": "2025-05-20T11:00:00.000000-07:00",
            "expiration_date": EXPIRES.isoformat(),
            "user_id": "alice",
            "app_id": "calendar-bot",
        },
        {
            "id": "c0ffee00-0000-4000-8000-000000000001",
            "memory": "Travel agent books aisle seats",
            "hash": "11223344556677889900aabbccddeeff",
            "created_at": "2025-06-01T08:00:00+00:00",
            "updated_at": "2025-06-01T08:00:00+00:00",
            "agent_id": "travel-agent",
        },
        {"id": "c0ffee00-0000-4000-8000-000000000002", "user_id": "alice", "created_at": "2025-06-01T08:00:00Z"},
        {
            "id": "c0ffee00-0000-4000-8000-000000000003",
            "memory": "Works at Initech",
            "user_id": "alice",
            "created_at": "last tuesday",
        },
    ]
}


def run(capsys: pytest.CaptureFixture[str], settings: Settings, *argv: str) -> tuple[int, list[dict], str]:  # type: ignore[type-arg]
    code = main(list(argv), settings=settings)
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def listed(capsys: pytest.CaptureFixture[str], settings: Settings, user: str, *more: str) -> list[dict]:  # type: ignore[type-arg]
    code, lines, _ = run(capsys, settings, "list", "--user", user, "--json", *more)
    assert code == EXIT_OK
    return lines


def test_a_mem0_export_comes_in_with_its_times_and_provenance_and_the_bad_records_named(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    path = tmp_path / "mem0.json"
    path.write_text(json.dumps(MEM0_EXPORT), encoding="utf-8")
    code, _, err = run(capsys, settings, "import", str(path))  # our lines are the default format
    assert code == EXIT_USAGE and f"run `rushmem import --format mem0 {path}`" in err
    code, (summary,), err = run(capsys, settings, "import", "--format", "mem0", str(path))
    assert code == EXIT_PARTIAL
    assert (summary["taken"], summary["skipped"]) == (2, 3)
    reasons = {s["line"]: s["reason"] for s in summary["skipped_lines"]}
    assert "user_id" in reasons[3] and "--user" in reasons[3]  # agent-scoped: whose is it?
    assert "memory: missing" in reasons[4]
    assert "created_at" in reasons[5]
    assert "skipped 3" in err

    memories = {m["content"]: m for m in listed(capsys, settings, "alice")}
    food = memories["Is vegetarian and allergic to peanuts"]
    assert food["id"] == "3f1c1e0a-5a2b-4c6e-9d6f-0b1a2c3d4e5f"  # mem0's id kept: importing again adds nothing
    assert food["created_at"].startswith("2025-03-14T16:26:53")  # the same instant, in UTC
    assert food["source"] == "mem0"
    assert food["metadata"]["channel"] == "web"
    assert food["metadata"]["mem0"]["hash"] == "8f5e0c6d1b2a3948576a6b5c4d3e2f10"
    meetings = memories["Prefers morning meetings and async communication"]
    assert meetings["category"] == "preference"
    assert meetings["metadata"]["mem0"]["categories"] == ["user_preferences", "professional_details"]
    assert meetings["metadata"]["mem0"]["app_id"] == "calendar-bot"
    end_of_day = (EXPIRES + dt.timedelta(days=1)).isoformat()
    assert meetings["expires_at"].startswith(f"{end_of_day}T00:00:00")  # the end of mem0's expiration day

    # The agent's memory has an owner once the command names one; the same file again adds nothing.
    code, (again,), _ = run(capsys, settings, "import", "--format", "mem0", "--user", "alice", str(path))
    assert code == EXIT_PARTIAL and again["taken"] == 3 and again["created"] == 1
    assert len(listed(capsys, settings, "alice")) == 3

    # And back to mem0's shape: the ids, texts, times and mem0's own fields as they came.
    out = tmp_path / "back.json"
    code, _, _ = run(capsys, settings, "export", "--user", "alice", "--format", "mem0", "--out", str(out))
    assert code == EXIT_OK
    back = {r["id"]: r for r in json.loads(out.read_text(encoding="utf-8"))["results"]}
    record = back["b7d4a6c2-1e3f-4a5b-8c9d-0e1f2a3b4c5d"]
    assert record["memory"] == "Prefers morning meetings and async communication"
    assert record["categories"] == ["user_preferences", "professional_details"]
    assert record["expiration_date"] == EXPIRES.isoformat() and record["app_id"] == "calendar-bot"
    assert record["user_id"] == "alice" and "mem0" not in (record["metadata"] or {})
    assert back["3f1c1e0a-5a2b-4c6e-9d6f-0b1a2c3d4e5f"]["metadata"] == {"channel": "web"}


def test_a_file_that_is_no_mem0_export_is_refused_whole(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"results": [', encoding="utf-8")
    code, out, err = run(capsys, settings, "import", "--format", "mem0", str(path))
    assert code == EXIT_USAGE and out == [] and "not JSON" in err
    path.write_text(json.dumps({"results": {"id": "x"}}), encoding="utf-8")
    code, out, err = run(capsys, settings, "import", "--format", "mem0", str(path))
    assert code == EXIT_USAGE and "results" in err and "not a list" in err


def test_ours_to_oms_and_back_keeps_text_times_provenance_and_what_ended(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    lines = [
        {"user_id": "bob", "content": "Lives in Lisbon", "category": "identity", "created_at": "2024-01-10T08:00:00Z",
         "valid_from": "2023-06-01T00:00:00Z", "project_id": "home", "metadata": {"evidence": ["chat:12"]}},
        {"user_id": "bob", "content": "Drinks oat milk", "category": "preference", "created_at": "2024-02-01T08:00:00Z",
         "is_evergreen": True},
        {"user_id": "bob", "content": "Owns a Honda Civic", "created_at": "2022-03-01T08:00:00Z",
         "valid_until": "2024-04-30T00:00:00Z", "id": "0c1a1c00-0000-4000-8000-000000000001"},
    ]  # fmt: skip
    source = tmp_path / "ours.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    code, _, _ = run(capsys, settings, "import", "--source", "handwritten", str(source))
    assert code == EXIT_OK
    (old,) = [m for m in listed(capsys, settings, "bob", "--project", "home") if m["content"] == "Lives in Lisbon"]
    code, _, _ = run(
        capsys, settings, "add", "--user", "bob", "--project", "home", "--supersedes", old["id"],
        "--valid-from", "2024-09-01T00:00:00Z", "Lives in Porto",
    )  # fmt: skip
    assert code == EXIT_OK

    current = {m["content"] for m in listed(capsys, settings, "bob", "--project", "home")}
    assert "Lives in Porto" in current and "Lives in Lisbon" not in current
    before = tmp_path / "before.jsonl"
    code, _, _ = run(capsys, settings, "export", "--user", "bob", "--out", str(before))
    assert code == EXIT_OK
    grains_path = tmp_path / "bob.oms.jsonl"
    code, _, _ = run(capsys, settings, "export", "--user", "bob", "--format", "oms", "--out", str(grains_path))
    assert code == EXIT_OK
    grains = [json.loads(line) for line in grains_path.read_text(encoding="utf-8").splitlines()]
    assert len(grains) == 4 and all(g["type"] == "fact" and g["subject"] == "bob" for g in grains)
    lisbon = next(g for g in grains if g["object"] == "Lives in Lisbon")
    assert lisbon["relation"] == "identity" and lisbon["namespace"] == "home"
    assert lisbon["valid_from"] == 1685577600000  # 2023-06-01, Unix ms as the spec writes times
    assert lisbon["system_valid_to"] == lisbon["valid_to"] or lisbon["valid_to"] <= lisbon["system_valid_to"]
    civic = next(g for g in grains if g["object"] == "Owns a Honda Civic")
    assert civic["valid_to"] == 1714435200000 and "system_valid_to" not in civic  # ended, never superseded

    # Into another store (here: the same one, erased first), then exported again: the same lines.
    code, _, _ = run(capsys, settings, "forget-user", "--user", "bob")
    assert code == EXIT_OK
    code, (summary,), _ = run(capsys, settings, "import", "--format", "oms", str(grains_path))
    assert code == EXIT_OK and summary["taken"] == 4
    after = tmp_path / "after.jsonl"
    code, _, _ = run(capsys, settings, "export", "--user", "bob", "--out", str(after))

    def essence(path: Path) -> dict[str, dict]:  # type: ignore[type-arg]
        keep = ("content", "category", "created_at", "valid_from", "valid_until", "superseded_by", "superseded_at",
                "source", "project_id", "metadata", "is_evergreen", "expires_at")  # fmt: skip
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        return {r["id"]: {k: r.get(k) for k in keep} for r in rows}

    was, now_ = essence(before), essence(after)
    assert set(now_) == set(was)
    for memory_id, fields in was.items():
        assert now_[memory_id] == fields, memory_id
    assert {m["content"] for m in listed(capsys, settings, "bob", "--project", "home")} == current
    then = {m["content"] for m in listed(capsys, settings, "bob", "--as-of", "2024-06-01T00:00:00Z")}
    assert "Lives in Lisbon" in then and "Owns a Honda Civic" not in then  # valid times, as they were


def test_grains_from_another_oms_store_keep_their_validity_and_origin(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    grains = [
        # OMS test vector 3's bi-temporal fact (a fact that ended on 2026-01-01), and a compacted one.
        {"type": "fact", "subject": "Alice", "relation": "works_at", "object": "Acme Corp", "confidence": 0.95,
         "source_type": "user_explicit", "created_at": 1737000000000, "valid_from": 1735689600000,
         "valid_to": 1767225600000, "system_valid_from": 1737000000000, "user_id": "alice",
         "author_did": "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK"},
        {"t": "fact", "s": "user", "r": "prefers", "o": "dark mode", "c": 0.9, "st": "user_explicit",
         "ca": 1768471200000, "ns": "shared"},
        {"type": "episode", "content": "Asked about dark mode settings", "created_at": 1768471200000},
        {"t": "fact", "s": "user", "r": "uses", "o": "Vim", "ca": 1700000000000, "vt": 1760000000000,
         "svt": 1760000000000, "sb": "3288d0d41cf49a1d428e404f0b6a6fe60388be9536937557f6139b813d53a520"},
        {"type": "tool_call", "tool_name": "search", "created_at": 1768471200000},
        {"type": "fact", "subject": "user", "relation": "likes", "object": "tea", "created_at": "yesterday"},
    ]  # fmt: skip
    path = tmp_path / "grains.jsonl"
    path.write_text("\n".join(json.dumps(g) for g in grains), encoding="utf-8")
    code, (summary,), _ = run(capsys, settings, "import", "--format", "oms", "--user", "alice", str(path))
    assert code == EXIT_PARTIAL and summary["taken"] == 4
    reasons = {s["line"]: s["reason"] for s in summary["skipped_lines"]}
    assert "tool_call grain" in reasons[5]
    assert "created_at" in reasons[6] and "milliseconds" in reasons[6]

    everything = {m["content"]: m for m in listed(capsys, settings, "alice", "--include-inactive")}
    acme = everything["Alice works at Acme Corp"]
    assert acme["valid_from"].startswith("2025-01-01") and acme["valid_until"].startswith("2026-01-01")
    assert acme["source"] == "oms" and acme["metadata"]["oms"]["author_did"].startswith("did:key:")
    assert everything["user prefers dark mode"]["created_at"].startswith("2026-01-15T10:00:00")
    assert "Asked about dark mode settings" in everything
    # Superseded in the other store (system_valid_to): history, not what holds now. A fact that held
    # for a past period (valid_to, still known) stays, and is out of an as-of view past its end.
    current = {m["content"] for m in listed(capsys, settings, "alice")}
    assert "user uses Vim" not in current and "Alice works at Acme Corp" in current
    assert everything["user uses Vim"]["superseded_at"].startswith("2025-10-09")
    then = {m["content"] for m in listed(capsys, settings, "alice", "--as-of", "2026-06-01T00:00:00Z")}
    assert "Alice works at Acme Corp" not in then
    code, (again,), _ = run(capsys, settings, "import", "--format", "oms", "--user", "alice", str(path))
    assert again["created"] == 0  # the same grains again: nothing new


def _node(node_id: str, parent: str | None, children: list[str], role: str | None, text: str, at: float) -> dict:  # type: ignore[type-arg]
    message = None
    if role is not None:
        message = {
            "id": node_id,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": at,
            "content": {"content_type": "text", "parts": [text]},
            "status": "finished_successfully",
            "metadata": {},
        }
    return {"id": node_id, "message": message, "parent": parent, "children": children}


def test_a_chatgpt_export_goes_through_extraction_dated_by_its_turns(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    # ChatGPT's conversations.json: a mapping tree; the user edited a message, so the tree has a
    # branch that is not shown (current_node's path is), and an empty system node at the top.
    t0 = 1718000000.0  # 2024-06-10
    mapping = {
        "root": _node("root", None, ["sys"], None, "", t0),
        "sys": _node("sys", "root", ["u1"], "system", "", t0),
        "u1": _node("u1", "sys", ["a1"], "user", "I prefer TypeScript over JavaScript.", t0 + 10),
        "a1": _node("a1", "u1", ["u2old", "u2"], "assistant", "Noted! TypeScript it is.", t0 + 20),
        "u2old": _node("u2old", "a1", [], "user", "I use Emacs.", t0 + 30),
        "u2": _node("u2", "a1", ["a2"], "user", "I use Neovim for editing.", t0 + 40),
        "a2": _node("a2", "u2", [], "assistant", "Great choice.", t0 + 50),
    }
    export = [
        {"title": "Editors", "create_time": t0, "update_time": t0 + 50, "mapping": mapping, "current_node": "a2",
         "conversation_id": "6666aaaa-0000-4000-8000-000000000001"},
        {"title": "Broken", "mapping": "nope"},
    ]  # fmt: skip
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    code, _, err = run(capsys, settings, "import", str(path))
    assert code == EXIT_USAGE and "--format chatgpt" in err
    code, out, err = run(capsys, settings, "import", "--format", "chatgpt", str(path))
    assert code == EXIT_USAGE and "--user" in err and out == []

    code, (summary,), err = run(capsys, settings, "import", "--format", "chatgpt", "--user", "carol", str(path))
    assert code == EXIT_PARTIAL and (summary["taken"], summary["skipped"]) == (1, 1)
    assert "conversation 2" in summary["skipped_lines"][0]["reason"]
    assert "mapping" in summary["skipped_lines"][0]["reason"]
    memories = listed(capsys, settings, "carol")
    text = " ".join(m["content"] for m in memories).lower()
    assert "typescript" in text and "neovim" in text
    assert "emacs" not in text  # the edited-away branch is not the conversation
    assert all(m["created_at"].startswith("2024-06-10") for m in memories)  # the chat's time, not today

    # A plain list of {role, content} messages is one conversation.
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps([{"role": "user", "content": "I prefer dark mode in every editor."}]), "utf-8")
    code, (summary,), _ = run(capsys, settings, "import", "--format", "chatgpt", "--user", "dave", str(plain))
    assert code == EXIT_OK and summary["taken"] == 1
    assert any("dark mode" in m["content"].lower() for m in listed(capsys, settings, "dave"))


def test_a_chat_export_is_what_the_llm_extractor_reads_and_its_memories_keep_the_chats_time(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    t0 = 1718000000.0  # 2024-06-10
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "We moved the team to Rust last month.", "created_at": "2024-06-10T06:00:00Z"},
        {"role": "assistant", "content": "How is the migration going?", "created_at": "2024-06-10T06:00:30Z"},
    ]
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"conversation_id": "c-rust", "update_time": t0, "messages": messages}), "utf-8")
    with ChatServer() as llm:
        llm.script(Reply(body=memories_answer({"content": "The team moved to Rust", "category": "project"})))
        openai = settings.model_copy(
            update={"llm_provider": "openai", "llm_base_url": llm.base_url, "llm_model": "glm-4-flash",
                    "http_timeout_s": 2.0, "max_retries": 0}
        )  # fmt: skip
        code, (summary,), err = run(capsys, openai, "import", "--format", "chatgpt", "--user", "erin", str(path))
        prompt = json.dumps(llm.requests[0].json)
    assert code == EXIT_OK and summary["taken"] == 1 and "1 memories extracted" in err
    assert "moved the team to Rust" in prompt and "helpful assistant" not in prompt  # the turns, not the system
    (memory,) = listed(capsys, settings, "erin")
    assert memory["content"] == "The team moved to Rust" and memory["category"] == "project"
    assert memory["created_at"].startswith("2024-06-10T06:00:00")  # the chat's time (its user turn), not today


def test_an_import_line_without_an_id_keeps_its_end_and_its_source(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    # What a line states is what is read back: an end (valid_until, superseded_at) and a source are
    # kept on a line that names no id, as on an exported one (they were dropped before).
    lines = [
        {"user_id": "fay", "content": "Owns a Honda Civic", "created_at": "2022-03-01T08:00:00Z",
         "valid_until": "2024-04-30T00:00:00Z", "source": "crm"},
        {"user_id": "fay", "content": "Lived in Oslo", "created_at": "2020-01-01T00:00:00Z",
         "superseded_at": "2023-01-01T00:00:00Z"},
        {"user_id": "fay", "content": "Drinks tea", "source": "crm"},
    ]  # fmt: skip
    path = tmp_path / "fay.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    code, (summary,), _ = run(capsys, settings, "import", str(path))
    assert code == EXIT_OK and summary["created"] == 3
    out = tmp_path / "out.jsonl"
    code, _, _ = run(capsys, settings, "export", "--user", "fay", "--out", str(out))
    back = {r["content"]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert back["Owns a Honda Civic"]["valid_until"] == "2024-04-30T00:00:00Z"
    assert back["Owns a Honda Civic"]["source"] == "crm" and back["Drinks tea"]["source"] == "crm"
    assert back["Lived in Oslo"]["superseded_at"] == "2023-01-01T00:00:00Z"
    assert "Lived in Oslo" not in {m["content"] for m in listed(capsys, settings, "fay")}  # ended: not current
    code, (again,), _ = run(capsys, settings, "import", str(path))
    assert again["created"] == 0  # the same lines again fold into what they stated


def test_the_conversions_serve_the_in_process_memory_as_the_cli(service: Memory) -> None:
    # docs/import-export.md, "From Python": the readers' lines into Memory.import_, the writers over its export.
    lines, refused = import_lines(mem0.read(json.dumps(MEM0_EXPORT), user_id="alice"))
    assert len(lines) == 3 and service.import_(lines).created == 3
    assert refused[0] == "record 4: memory: missing" and refused[1].startswith("record 5: created_at: Input should")
    page = service.export(user_id="alice")
    grains = list(oms.write(page.lines))
    assert {g["object"] for g in grains} == {line.content for line in lines}
    again, refused = import_lines(oms.read("\n".join(map(json.dumps, grains))))
    assert refused == [] and service.import_(again).created == 0  # the same memories, under the same ids
