"""The README stays true: its configuration table is generated from the settings."""

from __future__ import annotations

from pathlib import Path

from agent_memory.config import settings_table

README = Path(__file__).resolve().parents[2] / "README.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def test_readme_config_table_matches_the_settings() -> None:
    text = README.read_text(encoding="utf-8")
    assert START in text and END in text, "README lost its config-table markers"
    table = text.split(START, 1)[1].split(END, 1)[0].strip()
    assert table == settings_table(), "regenerate it: agent-memory config --markdown"


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.index("make demo") < text.index("## Configuration")
    assert "make test" in text
