"""The README's configuration table is generated from Settings and must not go stale."""

from __future__ import annotations

import pytest
from agent_memory.config import Settings
from agent_memory.settings_doc import END, START, replace_table, settings_table

from tests.deploy.conftest import REPO


def test_table_lists_every_setting_with_its_variable_default_and_meaning() -> None:
    table = settings_table()
    for name, field in Settings.model_fields.items():
        assert f"`AGENT_MEMORY_{name.upper()}`" in table
        assert field.description, f"{name} has no description for the README"
    assert "| `AGENT_MEMORY_DB_PORT` | `5432` |" in table
    assert "| `AGENT_MEMORY_DATABASE_URL` | unset |" in table


def test_replace_table_rewrites_only_the_marked_block() -> None:
    text = f"intro\n{START}\nold table\n{END}\noutro\n"
    updated = replace_table(text)
    assert updated.startswith(f"intro\n{START}\n| Variable |") and updated.endswith(f"{END}\noutro\n")
    assert replace_table(updated) == updated
    with pytest.raises(ValueError, match="settings-table"):
        replace_table("no markers here")


def test_readme_table_is_current() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    if START not in readme:
        pytest.skip("README.md has no settings table yet (python -m agent_memory.settings_doc prints one)")
    assert replace_table(readme) == readme, "stale: run python -m agent_memory.settings_doc --write README.md"
