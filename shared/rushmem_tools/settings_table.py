"""The settings as the command line and the docs show them: ``rushmem config`` (secrets
masked) and the configuration table of docs/configuration.md, generated from the fields'
descriptions (kept in sync by tests/unit/test_docs.py). Lambda never needs either."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from rushmem.config import Settings
from rushmem.privacy import PiiPolicy

TABLE_START, TABLE_END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def settings_table() -> str:
    """The configuration table of docs/configuration.md, from the fields' descriptions (kept in sync by a test)."""
    lines = ["| variable | meaning | default |", "| --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        default = field.default
        if isinstance(default, tuple):
            default = ",".join(default) or None  # an empty list: nothing set
        shown = "unset" if default is None else str(default).lower() if isinstance(default, bool) else f"`{default}`"
        description = " ".join((field.description or "").split()).replace("|", "\\|")
        lines.append(f"| `RUSHMEM_{name.upper()}` | {description} | {shown} |")
    return "\n".join(lines)


def with_settings_table(text: str) -> str:
    """``text`` (docs/configuration.md) with the table between its markers regenerated."""
    start, end = text.find(TABLE_START), text.find(TABLE_END)
    if start < 0 or end < start:
        raise ValueError(f"no {TABLE_START} ... {TABLE_END} block")
    return text[: start + len(TABLE_START)] + "\n" + settings_table() + "\n" + text[end:]


def effective_settings(settings: Settings) -> dict[str, object]:
    """Every setting with its value, secrets masked: what `rushmem config` prints."""
    values: dict[str, object] = {}
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            value = "********"
        elif isinstance(value, Path | PiiPolicy):
            value = str(value)
        values[f"RUSHMEM_{name.upper()}"] = value
    return values
