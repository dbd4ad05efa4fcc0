"""The rushmem command: JSON on stdout, clear errors, imports that never lose lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rushmem.config import Settings
from rushmem.recall.block import BLOCK_GUARD
from rushmem_contract.kinds import EXIT_PARTIAL
from rushmem_tools.cli import main

EVENTS = Path(__file__).resolve().parents[2] / "events"


def run(capsys: pytest.CaptureFixture[str], settings: Settings, *argv: str) -> tuple[int, list[dict], str]:  # type: ignore[type-arg]
    code = main(list(argv), settings=settings)
    out, err = capsys.readouterr()
    return code, [json.loads(line) for line in out.splitlines() if line.strip()], err


def test_add_recall_list_forget(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    code, (added,), _ = run(capsys, settings, "add", "--user", "u1", "Prefers TypeScript", "Uses pnpm")
    assert code == 0 and len(added["ids"]) == 2 and added["created"] == 2
    code, (result,), _ = run(capsys, settings, "recall", "--user", "u1", "--limit", "1", "TypeScript")
    # The operation's answer, as every door gives it.
    assert code == 0
    assert set(result) == {"memories", "prompt_block", "block_tokens", "query", "explanation", "unavailable"}
    (memory,) = result["memories"]
    assert set(memory) == {
        "id", "content", "category", "score", "created_at", "is_evergreen", "project_id", "metadata", "injection"
    }  # fmt: skip
    assert memory["content"] == "Prefers TypeScript"
    assert result["prompt_block"].splitlines() == [
        "[RUSH_MEMORY]",
        BLOCK_GUARD,
        "Relevant memories:",
        "1. Prefers TypeScript",
        "[/RUSH_MEMORY]",
    ]
    code, listed, _ = run(capsys, settings, "list", "--user", "u1")
    assert code == 0 and {m["content"] for m in listed} == {"Prefers TypeScript", "Uses pnpm"}
    code, (forgot,), _ = run(capsys, settings, "forget", "--user", "u1", "--id", memory["id"])
    assert code == 0 and forgot == {"done": True}
    code, out, err = run(capsys, settings, "forget", "--user", "u1", "--id", memory["id"])
    assert code == 1 and out == [] and "no memory with this id" in err  # gone: not found, as over HTTP
    code, (receipt,), _ = run(capsys, settings, "forget-user", "--user", "u1")
    assert receipt["deleted"]["memories"] == 1 and receipt["requested_by"] == "cli"
    assert "u1" not in json.dumps(receipt)  # the receipt holds no user id
    code, (again,), _ = run(capsys, settings, "erasure", receipt["id"])
    assert code == 0 and again == receipt
    code, found, _ = run(capsys, settings, "erasures", "--user", "u1")
    assert code == 0 and found == [receipt]


def test_import_skips_bad_lines_with_reasons_and_keeps_the_rest(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, settings: Settings, tmp_path: Path
) -> None:
    lines = [
        json.dumps(
            {
                "user_id": "u1",
                "content": "Good one",
                "created_at": "2023-05-08T13:56:00+00:00",
                "metadata": {"evidence": ["D1:3"]},
            }
        ),
        "{not json",
        json.dumps({"user_id": "", "content": "empty user"}),
        json.dumps({"user_id": "u1"}),
        "",
        json.dumps({"user_id": "u1", "content": "x" * 3000}),
        json.dumps({"user_id": "u2", "content": "Another good one", "category": "preference", "is_evergreen": True}),
    ]
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, (summary,), err = run(capsys, settings, "import", str(path))
    assert code == EXIT_PARTIAL == 6  # every line it could take went in, and some could not: its own code
    assert summary["taken"] == 2 and summary["skipped"] == 4
    assert (
        "rushmem: imported 2 lines; skipped 4 lines it could not take (lines 2, 3, 4, 6: the reasons are in "
        "the summary's skipped_lines)"
    ) in err
    assert [s["line"] for s in summary["skipped_lines"]] == [2, 3, 4, 6]
    reasons = {s["line"]: s["reason"] for s in summary["skipped_lines"]}
    assert "user_id" in reasons[3] and "content" in reasons[4] and "limit" in reasons[6]
    assert "line 2 skipped" in caplog.text  # logged on stderr as it happens
    code, (result,), _ = run(capsys, settings, "recall", "--user", "u1", "good")
    (memory,) = result["memories"]
    assert memory["metadata"] == {"evidence": ["D1:3"]}
    assert memory["created_at"].startswith("2023-05-08T13:56:00")


def test_batch_recall_keeps_one_line_per_query_in_order(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    run(capsys, settings, "add", "--user", "u1", "Prefers TypeScript", "Lives in Lisbon")
    queries = tmp_path / "q.jsonl"
    queries.write_text(
        "\n".join(
            [
                json.dumps({"user_id": "u1", "query": "TypeScript", "evidence": ["ignored"], "limit": 1}),
                json.dumps({"user_id": "u1"}),
                json.dumps({"user_id": "nobody", "query": "anything", "now": "2024-01-01T00:00:00Z"}),
                json.dumps({"user_id": "u1", "query": "Lisbon", "limit": 99}),
            ]
        )
    )
    out = tmp_path / "r.jsonl"
    code, (summary,), _ = run(capsys, settings, "recall", "--queries", str(queries), "--out", str(out))
    assert code == 0 and summary["queries"] == 4 and summary["recalled"] == 2 and summary["failed"] == 2
    results = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(results) == 4
    assert [m["content"] for m in results[0]["memories"]] == ["Prefers TypeScript"]
    assert results[1]["memories"] == [] and "query" in results[1]["error"]
    assert results[2]["memories"] == [] and "error" not in results[2]
    assert "limit" in results[3]["error"]


def test_errors_go_to_stderr_with_an_exit_code(capsys: pytest.CaptureFixture[str], settings: Settings) -> None:
    code, out, err = run(capsys, settings, "recall", "--user", "u1", "--limit", "0", "x")
    assert code == 2 and out == [] and "limit" in err
    code, out, err = run(capsys, settings, "forget", "--user", "u1")
    assert code == 2 and "memory_id: Field required" in err
    broken = Settings(database_url="postgresql://nobody@127.0.0.1:1/x", embedding_provider="hash", connect_timeout_s=1)
    code, out, err = run(capsys, broken, "list", "--user", "u1")
    assert code == 4 and "database unavailable" in err and "127.0.0.1:1" in err


def test_several_processes_share_one_embedded_data_dir(embedded_dir: Path) -> None:
    """Three CLI processes start on the same (new) data directory at once; the server stops after all."""
    data_dir = embedded_dir
    env = {**os.environ, "RUSHMEM_DATA_DIR": str(data_dir), "RUSHMEM_EMBEDDING_PROVIDER": "hash"}
    cmd = [sys.executable, "-m", "rushmem_tools"]
    procs = [
        subprocess.Popen(
            [*cmd, "add", "--user", f"u{i}", f"fact from process {i}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(3)
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert json.loads(out)["created"] == 1
    listed = subprocess.run([*cmd, "list", "--user", "u2"], env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["content"] == "fact from process 2"
    deadline = time.monotonic() + 10
    while (data_dir / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (data_dir / "postmaster.pid").exists()  # stopped when the last process exited


def test_instructions_are_set_shown_and_versioned_and_a_bad_file_names_the_field(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    code, (shown,), _ = run(capsys, settings, "instructions", "--user", "u1", "--project", "web")
    assert code == 0 and shown["version"] == 0
    path = tmp_path / "instructions.json"
    path.write_text(json.dumps({"ignore": ["football"], "categories": [{"name": "diet", "keywords": ["vegan"]}]}))
    user = ("--user", "u1", "--project", "web")
    code, (stored,), _ = run(capsys, settings, "set-instructions", *user, "--input", str(path))
    assert code == 0 and stored["version"] == 1 and stored["source"] == "cli"
    code, versions, _ = run(capsys, settings, "instructions-history", *user)
    assert [v["instructions"]["ignore"] for v in versions] == [["football"]]
    path.write_text(json.dumps({"ignore": ["x" * 201]}))
    code, out, err = run(capsys, settings, "set-instructions", *user, "--input", str(path))
    assert code == 2 and out == [] and "ignore[0] is 201 characters; the limit is 200" in err
    # The flags are the fields too.
    code, (flagged,), _ = run(capsys, settings, "set-instructions", *user, "--ignore", "weather", "--ignore", "sport")
    assert code == 0 and flagged["instructions"]["ignore"] == ["weather", "sport"]


@pytest.mark.parametrize("command", ["list", "recall"])
def test_a_metadata_filter_that_is_not_json_names_the_filter(
    capsys: pytest.CaptureFixture[str], settings: Settings, command: str
) -> None:
    # The same field the HTTP API names for a bad metadata query parameter (filters.metadata).
    words = ["tea"] if command == "recall" else []
    code, _, err = run(capsys, settings, command, "--user", "u1", "--metadata", "{not json", *words)
    assert code == 2 and "--metadata is not JSON" in err and "(filters.metadata)" in err


def test_an_event_file_given_to_ingest_or_import_names_the_command_it_is_for(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path
) -> None:
    envelope = str(EVENTS / "conversation-ended.json")
    code, out, err = run(capsys, settings, "ingest", envelope)
    assert code == 1 and out[0]["line"] == 1
    invoke = f"is an aws:sqs event (Records): run `rushmem invoke IngestFunction {envelope}`"
    assert invoke in out[0]["error"] and f"rushmem: not a conversation-ended message: {envelope} {invoke}" in err
    code, (summary,), err = run(capsys, settings, "import", envelope)
    assert code == 2 and summary["taken"] == 0  # nothing could be taken: the file is the mistake
    assert f"rushmem: not import lines: {envelope} {invoke}" in err
    conversations = tmp_path / "conversations.jsonl"
    conversations.write_text(json.dumps({"user_id": "u", "messages": [{"role": "user", "content": "hi"}]}) + "\n")
    code, _, err = run(capsys, settings, "import", str(conversations))
    assert code == 2 and f"holds conversations: run `rushmem ingest {conversations}`" in err
    memories = tmp_path / "memories.jsonl"
    memories.write_text(json.dumps({"user_id": "u", "content": "Prefers tea"}) + "\n")
    code, out, err = run(capsys, settings, "ingest", str(memories))
    assert code == 1 and f"holds memories (import lines): run `rushmem import {memories}`" in err


def test_a_bedrock_extractor_without_a_region_is_one_line_and_exit_3(
    capsys: pytest.CaptureFixture[str], settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    conversation = tmp_path / "c.json"
    conversation.write_text(json.dumps({"user_id": "u", "messages": [{"role": "user", "content": "I prefer tea"}]}))
    code, out, err = run(capsys, settings.model_copy(update={"llm_provider": "bedrock"}), "ingest", str(conversation))
    assert code == 3 and out == []
    assert err.splitlines() == [
        "rushmem: configuration error: bedrock-runtime: no AWS Region: "
        "set RUSHMEM_BEDROCK_REGION (or AWS_DEFAULT_REGION)"
    ]
