"""Settings: the environment, their compact forms, their errors (what loads at import: test_imports.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from pydantic import ValidationError

from rushmem.config import Settings, default_data_dir, get_settings


def test_defaults_need_no_environment() -> None:
    assert Settings().uses_embedded  # nothing configured: the embedded database


def test_the_command_line_logs_at_the_configured_level() -> None:
    code = "import logging; from rushmem_tools.cli import main; main(['config']); print(logging.getLogger().level)"
    env = {"AGENT_MEMORY_LOG_LEVEL": "info", "PATH": "/usr/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    printed = result.stdout.strip().splitlines()
    assert '"RUSHMEM_LOG_LEVEL": "INFO"' in printed[0] and printed[-1] == "20"
    # The old name is read, and the notice names the new one in one line.
    assert "FutureWarning: AGENT_MEMORY_LOG_LEVEL is deprecated: set RUSHMEM_LOG_LEVEL" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_rushmem_names_win_over_the_old_ones_which_say_their_new_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUSHMEM_LLM_PROVIDER", "rules")
    monkeypatch.setenv("AGENT_MEMORY_LLM_PROVIDER", "openai")
    monkeypatch.setenv("AGENT_MEMORY_DECAY_FLOOR", "0.25")
    monkeypatch.setenv("AGENT_MEMORY_OPENAI_API_KEY", "sk-old")
    monkeypatch.setenv("AGENT_MEMORY_PYTHON", "/usr/bin/python3")  # not a setting: no notice
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        settings = Settings()
    assert settings.llm_provider == "rules" and settings.decay_floor == 0.25
    assert settings.openai_api_key is not None and settings.openai_api_key.get_secret_value() == "sk-old"
    notices = sorted(str(w.message) for w in caught if issubclass(w.category, FutureWarning))
    assert notices == [
        "AGENT_MEMORY_DECAY_FLOOR is deprecated: set RUSHMEM_DECAY_FLOOR (AGENT_MEMORY_* is still read for now)",
        "AGENT_MEMORY_OPENAI_API_KEY is deprecated: set RUSHMEM_OPENAI_API_KEY (AGENT_MEMORY_* is still read for now)",
    ]
    monkeypatch.setenv("RUSHMEM_OPENAI_API_KEY", "sk-new")
    assert Settings().openai_api_key.get_secret_value() == "sk-new"  # type: ignore[union-attr]


def _data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, old: bool, new: bool = False) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    if old:
        (tmp_path / "agent-memory" / "pgdata").mkdir(parents=True)
        (tmp_path / "agent-memory" / "pgdata" / "PG_VERSION").write_text("18\n")
    if new:
        (tmp_path / "rushmem").mkdir()
    return tmp_path


def test_the_data_folder_is_rushmem_and_an_old_one_moves_to_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = _data_home(monkeypatch, tmp_path, old=False)
    assert default_data_dir() == home / "rushmem" / "pgdata"
    home = _data_home(monkeypatch, tmp_path, old=True)
    assert Settings().resolved_data_dir() == home / "rushmem" / "pgdata"
    assert (home / "rushmem" / "pgdata" / "PG_VERSION").read_text() == "18\n"  # the store came along
    assert not (home / "agent-memory").exists()


def test_an_old_data_folder_stays_while_its_server_runs_or_a_new_one_exists(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = _data_home(monkeypatch, tmp_path, old=True)
    (home / "agent-memory" / "pgdata" / "postmaster.pid").write_text("4242\n")
    assert default_data_dir() == home / "agent-memory" / "pgdata"  # used where it is
    (home / "agent-memory" / "pgdata" / "postmaster.pid").unlink()
    (home / "rushmem").mkdir()
    assert default_data_dir() == home / "rushmem" / "pgdata"  # the new one wins; the old is not touched
    assert (home / "agent-memory" / "pgdata" / "PG_VERSION").exists()


def test_environment_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("AGENT_MEMORY_DECAY_FLOOR", "0.5")
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", "postgresql://u:hunter2@db/x")
    s = get_settings()
    assert s.embedding_provider == "hash" and s.decay_floor == 0.5
    assert "hunter2" not in repr(s)  # the URL is a SecretStr
    assert get_settings() is s  # cached: one per process


def test_invalid_values_name_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "word2vec")
    with pytest.raises(ValidationError) as err:
        Settings()
    assert "embedding_provider" in str(err.value)


def test_the_tenant_settings_read_their_compact_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_PII", "redact,credential=drop")
    monkeypatch.setenv("AGENT_MEMORY_PII_COMPREHEND_TYPES", "name, address,passport_number")
    monkeypatch.setenv("AGENT_MEMORY_EVENT_BUS", "")  # what the template passes without a bus
    settings = Settings()
    assert settings.pii.mode_for("credential") == "drop" and settings.pii.mode_for("email") == "redact"
    assert settings.pii_comprehend_types == ("NAME", "ADDRESS", "PASSPORT_NUMBER")
    assert settings.event_bus is None and settings.usage_metering
    monkeypatch.setenv("AGENT_MEMORY_PII", "redact,shoe_size=drop")
    with pytest.raises(ValidationError, match="shoe_size"):
        Settings()
    monkeypatch.setenv("AGENT_MEMORY_PII", "off")
    monkeypatch.setenv("AGENT_MEMORY_PII_COMPREHEND_TYPES", "NAME,SHOE_SIZE")
    with pytest.raises(ValidationError, match="SHOE_SIZE"):
        Settings()


def test_credentials_are_kept_out_by_default_and_other_personal_data_is_opt_in() -> None:
    pii = Settings().pii
    assert pii.mode_for("credential") == "redact"
    assert all(pii.mode_for(category) == "off" for category in ("email", "phone", "payment_card", "name"))


def test_openai_api_key_and_base_url_are_read_as_openai_sdk_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-openai-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "https://llm.example/v1")
    settings = Settings()
    assert settings.openai_api_key is not None and settings.openai_api_key.get_secret_value() == "sk-from-openai-env"
    assert settings.openai_base_url == "https://llm.example/v1"
    monkeypatch.setenv("AGENT_MEMORY_OPENAI_API_KEY", "sk-prefixed")  # the prefixed name wins
    assert Settings().openai_api_key.get_secret_value() == "sk-prefixed"  # type: ignore[union-attr]
    assert Settings(openai_api_key="sk-by-name").openai_api_key.get_secret_value() == "sk-by-name"  # type: ignore[union-attr]


def test_blank_data_dir_and_database_url_are_unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # the default folder is resolved: not this user's
    # AGENT_MEMORY_DATA_DIR="" used to become Path(""), i.e. the working directory, which the
    # embedded server would then try to initialise and chown as its data directory.
    monkeypatch.setenv("AGENT_MEMORY_DATA_DIR", "")
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", "  ")
    settings = get_settings()
    assert settings.data_dir is None and settings.database_url is None
    assert settings.resolved_data_dir().name == "pgdata"
