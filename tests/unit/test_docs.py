"""The README stays true: its configuration table is generated from the settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory.config import TABLE_END, TABLE_START, Settings, settings_table, with_settings_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_config_table_matches_the_settings() -> None:
    text = README.read_text(encoding="utf-8")
    assert TABLE_START in text and TABLE_END in text, "README lost its config-table markers"
    assert with_settings_table(text) == text, "stale: run agent-memory config --readme README.md"


def test_every_setting_is_described_in_the_table() -> None:
    table = settings_table()
    for name, field in Settings.model_fields.items():
        assert field.description, f"{name} has no description for the README"
        assert f"`AGENT_MEMORY_{name.upper()}`" in table
    assert "| `AGENT_MEMORY_DB_PORT` | Port of db_host. | `5432` |" in table


def test_regeneration_touches_only_the_marked_block() -> None:
    text = f"intro\n{TABLE_START}\nold\n{TABLE_END}\noutro\n"
    updated = with_settings_table(text)
    assert updated.startswith(f"intro\n{TABLE_START}\n| variable |") and updated.endswith(f"{TABLE_END}\noutro\n")
    assert with_settings_table(updated) == updated
    with pytest.raises(ValueError, match="config-table"):
        with_settings_table("no markers")


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.index("make demo") < text.index("## Configuration")
    assert "make test" in text
