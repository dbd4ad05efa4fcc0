"""Settings: the environment, their compact forms, their errors (what loads at import: test_imports.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from rushmem.config import Settings, get_settings


def test_defaults_need_no_environment() -> None:
    assert Settings().uses_embedded  # nothing configured: the embedded database


def test_the_command_line_logs_at_the_configured_level() -> None:
    code = "import logging; from rushmem_tools.cli import main; main(['config']); print(logging.getLogger().level)"
    env = {"AGENT_MEMORY_LOG_LEVEL": "info", "PATH": "/usr/bin"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    printed = result.stdout.strip().splitlines()
    assert '"AGENT_MEMORY_LOG_LEVEL": "INFO"' in printed[0] and printed[-1] == "20"


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


def test_blank_data_dir_and_database_url_are_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    # AGENT_MEMORY_DATA_DIR="" used to become Path(""), i.e. the working directory, which the
    # embedded server would then try to initialise and chown as its data directory.
    monkeypatch.setenv("AGENT_MEMORY_DATA_DIR", "")
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", "  ")
    settings = get_settings()
    assert settings.data_dir is None and settings.database_url is None
    assert settings.resolved_data_dir().name == "pgdata"
