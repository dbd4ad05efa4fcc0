"""Blank location settings mean "unset", never "the current directory"."""

from __future__ import annotations

import pytest

from agent_memory.config import get_settings


def test_blank_data_dir_and_database_url_are_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    # AGENT_MEMORY_DATA_DIR="" used to become Path(""), i.e. the working directory, which the
    # embedded server would then try to initialise and chown as its data directory.
    monkeypatch.setenv("AGENT_MEMORY_DATA_DIR", "")
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", "  ")
    settings = get_settings()
    assert settings.data_dir is None and settings.database_url is None
    assert settings.resolved_data_dir().name == "pgdata"
