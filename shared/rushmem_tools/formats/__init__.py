"""Other systems' memory formats, to and from our import lines (docs/import-export.md).

Pure conversions, no I/O: each reader turns a parsed file into numbered records, each an import
line (a dict :class:`~rushmem_contract.models.ImportLine` validates at the door) or the reason
the record cannot be one, naming the record and the field; each writer turns export lines
(:class:`~rushmem_contract.models.ImportLine`) into the other system's shape.

- ``mem0``: mem0's ``get_all`` output (OSS ``{"results": [...]}``, the platform's pages, or a bare list).
- ``oms``: the Open Memory Specification's grains, as the spec writes them in JSON (full field
  names, Unix milliseconds), one per line.
- ``chat``: conversation exports (ChatGPT's ``conversations.json``, or a list of ``{role, content}``
  messages): conversations to extract from, not memories.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import ImportLine, describe_errors

# A record: its number (1-based, in the file's order) and its import line, or why it is none.
Record = tuple[int, "dict[str, Any] | str"]


class Refused(ValueError):
    """One record that cannot be converted; the message names the field."""


def parse_document(text: str, what: str) -> Any:
    """The file as JSON, or JSON Lines as a list of their values; InvalidInput naming the line."""
    stripped = text.strip()
    if not stripped:
        raise InvalidInput(f"the {what} file is empty", field="file")
    try:
        return json.loads(stripped)
    except RecursionError:
        raise InvalidInput(f"the {what} file is nested too deeply", field="file") from None
    except ValueError as whole:
        values = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                values.append(json.loads(line))
            except (ValueError, RecursionError):
                if number == 1:
                    raise InvalidInput(f"the {what} file is not JSON: {whole}", field="file") from None
                raise InvalidInput(f"line {number} of the {what} file is not JSON", field=f"line {number}") from None
        return values


def records_of(value: Any, keys: tuple[str, ...], what: str) -> list[Any]:
    """The list of records a document holds: the document itself, or its first list under ``keys``."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in keys:
            if isinstance(value.get(key), list):
                return list(value[key])
        if any(key in value for key in keys):
            raise InvalidInput(f"the {what} file's {'/'.join(keys)} is not a list", field=keys[0])
        return [value]  # one record on its own
    raise InvalidInput(f"the {what} file holds {type(value).__name__}, not records", field="file")


def each(records: list[Any], convert: Any) -> Iterator[Record]:
    """``convert`` over numbered records, a refusal becoming that record's reason."""
    for number, record in enumerate(records, start=1):
        if not isinstance(record, dict):
            yield number, f"record {number}: not an object ({type(record).__name__})"
            continue
        try:
            yield number, convert(record)
        except Refused as exc:
            yield number, f"record {number}: {exc}"


def text_field(record: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = record.get(name)
    if value is None or value == "":
        if required:
            raise Refused(f"{name}: missing")
        return None
    if not isinstance(value, str):
        raise Refused(f"{name}: a string was expected, not {type(value).__name__}")
    return value


def required_text(record: dict[str, Any], name: str) -> str:
    value = text_field(record, name, required=True)
    assert value is not None  # text_field refused a missing one
    return value


def import_lines(records: Iterator[Record]) -> tuple[list[ImportLine], list[str]]:
    """The records that validate as import lines (for ``Memory.import_``), and why each other one
    does not, naming the record and the field (the CLI skips them so)."""
    lines: list[ImportLine] = []
    refused: list[str] = []
    for number, record in records:
        if isinstance(record, str):
            refused.append(record)
            continue
        try:
            lines.append(ImportLine.model_validate(record))
        except ValidationError as exc:
            refused.append(f"record {number}: {describe_errors(exc, 'record')}")
    return lines, refused
