"""What a person sees from the rushmem command: --version, a wrong flag, settings that do not parse,
text on a terminal (JSON Lines when piped or with --json), the demo touching only its own users, and the
stack's files found outside the checkout."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from rushmem import __version__
from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_contract.errors import ConfigurationError
from rushmem_contract.models import NewMemory
from rushmem_tools.cli import main
from rushmem_tools.local import stack

ROOT = Path(__file__).resolve().parents[2]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def on_terminal(monkeypatch: pytest.MonkeyPatch, settings: Settings, *argv: str) -> tuple[int, str]:
    out = Terminal()
    monkeypatch.setattr(sys, "stdout", out)
    code = main(list(argv), settings=settings)
    return code, out.getvalue()


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.strip() == f"rushmem {__version__}"


def test_a_wrong_flag_shows_the_usage_of_its_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["list", "--user", "u1", "--colour", "red"])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.startswith("usage: rushmem list") and "unrecognized arguments: --colour red" in err


def test_a_malformed_database_url_is_one_line_and_exit_3() -> None:
    env = {**os.environ, "RUSHMEM_DATABASE_URL": "postgresql//nobody@:not a url"}
    done = subprocess.run(
        [sys.executable, "-m", "rushmem_tools", "list", "--user", "u1"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert done.stderr.count("\n") == 1 and "RUSHMEM_DATABASE_URL is not a PostgreSQL URL" in done.stderr
    assert "nobody" not in done.stderr  # the string may hold a password: never repeated


def test_list_and_recall_print_text_on_a_terminal_and_json_when_asked(
    monkeypatch: pytest.MonkeyPatch, service: Memory, settings: Settings
) -> None:
    stored = service.add(
        [NewMemory(content="Prefers  TypeScript\nfor the editor", category="preference")], user_id="u1"
    )
    code, text = on_terminal(monkeypatch, settings, "list", "--user", "u1")
    assert code == 0
    line, summary = text.splitlines()
    assert line.startswith(f"{stored.ids[0]}  ") and line.endswith("preference  Prefers TypeScript for the editor")
    assert summary == "1 memories of u1, newest first"
    code, text = on_terminal(monkeypatch, settings, "recall", "--user", "u1", "TypeScript")
    assert code == 0 and text.splitlines()[0].split() == ["score", "category", "memory"]
    assert "preference  Prefers TypeScript for the editor" in text and text.rstrip().endswith("[/RUSH_MEMORY]")
    code, text = on_terminal(monkeypatch, settings, "list", "--user", "u1", "--json")
    assert json.loads(text)["id"] == str(stored.ids[0])
    code, text = on_terminal(monkeypatch, settings, "recall", "--user", "u1", "--json", "TypeScript")
    assert set(json.loads(text)) == {"memories", "prompt_block", "block_tokens", "query", "explanation", "unavailable"}


def test_config_prints_one_line_per_setting_on_a_terminal(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    code, text = on_terminal(monkeypatch, settings, "config")
    lines = text.splitlines()
    assert code == 0 and len(lines) == len(Settings.model_fields) + 1
    url = next(line for line in lines if "RUSHMEM_DATABASE_URL" in line)
    assert url.startswith("*") and url.split()[-1] == "********"  # set here, and masked
    level = next(line for line in lines if "RUSHMEM_LOG_LEVEL " in line)
    assert level.split() == ["RUSHMEM_LOG_LEVEL", "WARNING"]
    code, text = on_terminal(monkeypatch, settings, "config", "--json")
    assert json.loads(text)["RUSHMEM_LOG_LEVEL"] == "WARNING"


def test_the_demo_touches_only_the_users_it_creates(lambda_env: str, service: Memory) -> None:
    from rushmem.service import set_service
    from rushmem_tools.local.demo import run_demo

    for user in ("u-42", "u-77"):  # the event's users: someone's real data in this database
        service.add([NewMemory(content=f"{user} keeps this")], user_id=user)
    set_service(service)
    out = io.StringIO()
    assert run_demo(out, root=ROOT) == 0
    text = out.getvalue()
    assert "[/RUSH_MEMORY]" in text and "memories of demo-" in text
    for user in ("u-42", "u-77"):
        assert [m.content for m in service.list(user_id=user).memories] == [f"{user} keeps this"]
    demo_users = {word.rstrip(":") for word in text.split() if word.startswith("demo-")}
    assert len(demo_users) == 2 and all(not service.list(user_id=u).memories for u in demo_users)


def test_the_demo_erases_its_users_when_it_fails(
    lambda_env: str, service: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rushmem.service import set_service
    from rushmem_tools.local.demo import run_demo

    set_service(service)

    def failing_recall(*args: object, **kwargs: object) -> None:
        raise ConfigurationError("recall failed after the demo wrote its memories")

    monkeypatch.setattr(service, "recall", failing_recall)
    with pytest.raises(ConfigurationError, match="after the demo wrote"):
        run_demo(io.StringIO(), root=ROOT)
    with psycopg.connect(lambda_env) as conn:  # as the owner: every user's rows
        left = conn.execute("SELECT count(*) FROM user_memories").fetchone()
    assert left == (0,)  # what the demo wrote before failing is gone


def test_the_stack_is_found_outside_the_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    packaged = tmp_path / "site-packages" / "rushmem_tools" / "stack"
    (packaged / "events").mkdir(parents=True)
    (packaged / "template.yaml").write_text("Resources: {}\n")
    (packaged / "events" / "e.json").write_text("{}")
    elsewhere = tmp_path / "anywhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setattr(stack, "CHECKOUT", tmp_path / "no-checkout")
    monkeypatch.setattr(stack, "PACKAGED", packaged)
    assert stack.template_path(None) == packaged / "template.yaml"
    assert stack.event_path("events/e.json") == packaged / "events" / "e.json"
    with pytest.raises(ConfigurationError, match="omit --template"):
        stack.template_path("missing.yaml")
    monkeypatch.setattr(stack, "PACKAGED", tmp_path / "nothing")
    with pytest.raises(ConfigurationError, match="pass --template PATH"):
        stack.template_path(None)


def test_a_port_in_use_is_named_with_the_way_out(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code = main(["serve", "--port", str(port)], settings=Settings(embedding_provider="hash"))
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"port {port} on 127.0.0.1 is already in use" in err
    assert "--port 0" in err
    assert "warm-up" not in err  # said before the model or the database is touched


def test_import_on_a_terminal_counts_lines_of_the_total_and_says_what_it_skipped(
    monkeypatch: pytest.MonkeyPatch, settings: Settings, tmp_path: Path
) -> None:
    lines = [json.dumps({"user_id": "u-imp", "content": f"Fact number {n} about the editor"}) for n in range(5)]
    lines.insert(2, "{not json")
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    err = Terminal()
    monkeypatch.setattr(sys, "stderr", err)
    code = main(["import", str(source)], settings=settings)
    shown = [row.rsplit("\r", 1)[-1] for row in err.getvalue().replace("\x1b[K", "").splitlines()]
    assert code == 6  # a partial import (docs/cli.md)
    assert any(row.startswith("lines: 6/6") for row in shown), shown  # the total, counted before the import
    assert shown[-1].startswith("rushmem: imported 5 lines; skipped 1 line it could not take (line 3:")
