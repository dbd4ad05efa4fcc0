"""The documentation stays true: the configuration table is generated from the settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rushmem.config import Settings
from rushmem_tools.settings_table import TABLE_END, TABLE_START, settings_table, with_settings_table

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
CONFIGURATION = REPO / "docs" / "configuration.md"


def test_the_config_table_matches_the_settings() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    assert TABLE_START in text and TABLE_END in text, "docs/configuration.md lost its config-table markers"
    assert with_settings_table(text) == text, "stale: run rushmem config --write-table docs/configuration.md"


def test_every_setting_is_described_in_the_table() -> None:
    table = settings_table()
    for name, field in Settings.model_fields.items():
        assert field.description, f"{name} has no description for the README"
        assert f"`RUSHMEM_{name.upper()}`" in table
    assert "| `RUSHMEM_DB_PORT` | Port of db_host. | `5432` |" in table


def test_regeneration_touches_only_the_marked_block() -> None:
    text = f"intro\n{TABLE_START}\nold\n{TABLE_END}\noutro\n"
    updated = with_settings_table(text)
    assert updated.startswith(f"intro\n{TABLE_START}\n| variable |") and updated.endswith(f"{TABLE_END}\noutro\n")
    assert with_settings_table(updated) == updated
    with pytest.raises(ValueError, match="config-table"):
        with_settings_table("no markers")


def test_the_reference_lists_are_the_tables() -> None:
    """The routes, tools, commands and methods listed in docs/ are generated from the table of
    operations (and the MCP server's own list); stale: run `rushmem reference`."""
    from rushmem_tools import reference
    from rushmem_tools.cli.main import build_parser

    for path, text in reference.regenerated(REPO / "docs", build_parser(None)).items():
        assert path.read_text(encoding="utf-8") == text, f"stale: run rushmem reference (in {path.name})"


def test_the_api_pages_route_list_is_the_tables() -> None:
    """docs/api.md's table of routes (written for people: limits, defaults, links) names exactly the
    table's routes."""
    from rushmem_contract.operations import OPERATIONS

    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    table = text[text.index("| route | body / query | answer |") :].split("\n\n", 1)[0]
    listed = {
        (method, re.sub(r"\{[^}]+\}", "{}", path))
        for method, path in re.findall(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/[^`]*)`", table, re.MULTILINE)
    }
    # The routes that are no operation: the API's document and the memory page.
    listed -= {("GET", "/openapi.json"), ("GET", "/")}
    assert listed == {(op.method, re.sub(r"\{[^}]+\}", "{}", op.path)) for op in OPERATIONS}


def test_readme_starts_with_the_two_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert text.index("make demo") < text.index("## Use it from an agent") < text.index("## Configuration")
    assert "make test" in text


def test_relative_links_in_the_docs_lead_somewhere() -> None:
    pages = [README, REPO / "SECURITY.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert not broken, broken
