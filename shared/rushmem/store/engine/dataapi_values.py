"""How values travel to and from the RDS Data API (see :mod:`.dataapi`): psycopg's placeholders
become ``:name`` parameters with every typed value in its PostgreSQL text form and a cast, and
result fields are decoded to what psycopg gives for their column type."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector, SparseVector, Vector
from psycopg import sql
from psycopg.types.json import Json, Jsonb

from rushmem_contract.errors import ConfigurationError

# psycopg's placeholders (the same grammar as psycopg's own parser): %s, %b, %t, %(name)s, %%.
_PLACEHOLDER = re.compile(r"%(?:\(([^)]+)\))?(.)")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ---- values: Python -> a Data API parameter ------------------------------------------------


def _is_vector(value: object) -> bool:
    return isinstance(value, Vector | HalfVector | SparseVector) or (
        isinstance(value, np.ndarray) and value.ndim == 1 and value.dtype.kind == "f"
    )


_TYPES: tuple[tuple[type, str], ...] = (
    (Jsonb, "jsonb"), (Json, "json"), (uuid.UUID, "uuid"), (dt.date, "date"), (dt.time, "time"),
    (dt.timedelta, "interval"), (decimal.Decimal, "numeric"), (HalfVector, "halfvec"), (SparseVector, "sparsevec"),
)  # fmt: skip


def _type_of(value: object) -> str | None:
    """The PostgreSQL type psycopg would send ``value`` as, where the Data API's own (varchar,
    bigint, double precision, boolean, bytea) would differ; None: a native value."""
    if value is None or isinstance(value, bool | int | float | str | bytes | bytearray | memoryview | np.generic):
        return None
    if isinstance(value, dt.datetime):  # before date: a datetime is one
        return "timestamptz" if value.tzinfo is not None else "timestamp"
    for kind, name in _TYPES:
        if isinstance(value, kind):
            return name
    if _is_vector(value):
        return "vector"
    if isinstance(value, list | tuple) or (isinstance(value, np.ndarray) and value.ndim >= 1):
        return _element_type(value) + "[]"
    raise ConfigurationError(f"the Data API path cannot send a {type(value).__name__} parameter")


_NATIVE_ELEMENT = {bool: "boolean", int: "bigint", float: "double precision", str: "text", bytes: "bytea"}


def _element_type(values: Any) -> str:
    for item in values:
        if item is None:
            continue
        if isinstance(item, list | tuple) and not _is_vector(item):
            return _element_type(item)
        for kind, name in _NATIVE_ELEMENT.items():
            if type(item) is kind:
                return name
        if isinstance(item, np.integer):
            return "bigint"
        if isinstance(item, np.floating):
            return "double precision"
        found = _type_of(item)
        return found.removesuffix("[]") if found else "text"
    return "text"  # empty, or all NULL: as psycopg sends an untyped empty list


def _text(value: Any) -> str:
    """PostgreSQL's text input form of a non-native value."""
    if isinstance(value, Jsonb | Json):
        return json.dumps(value.obj)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return f"{value.total_seconds()} seconds"
    if _is_vector(value):
        return str((value if isinstance(value, Vector | HalfVector | SparseVector) else Vector(value)).to_text())
    if isinstance(value, list | tuple | np.ndarray):
        return "{" + ",".join(_array_item(v) for v in value) + "}"
    return str(value)


def _array_item(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool | np.bool_):
        return "t" if value else "f"
    if isinstance(value, int | float | np.integer | np.floating):
        return repr(float(value)) if isinstance(value, float | np.floating) else str(int(value))
    if isinstance(value, bytes | bytearray | memoryview):
        text = "\\x" + bytes(value).hex()
    elif isinstance(value, list | tuple) and not _is_vector(value):
        return "{" + ",".join(_array_item(v) for v in value) + "}"
    elif isinstance(value, str):
        text = value
    else:
        text = _text(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _field(value: Any) -> dict[str, Any]:
    if value is None:
        return {"isNull": True}
    if isinstance(value, bool | np.bool_):
        return {"booleanValue": bool(value)}
    if isinstance(value, int | np.integer):
        return {"longValue": int(value)}
    if isinstance(value, float | np.floating):
        return {"doubleValue": float(value)}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"blobValue": bytes(value)}
    return {"stringValue": _text(value)}


def _parameter(name: str, value: Any) -> tuple[dict[str, Any], str | None]:
    """The SqlParameter, and the cast its placeholder needs (None: none)."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        return {"name": name, "value": {"stringValue": str(value)}}, "numeric"
    return {"name": name, "value": _field(value)}, _type_of(value)


def compose(query: Any, params: Sequence[Any] | Mapping[str, Any] | None) -> tuple[str, list[dict[str, Any]]]:
    """psycopg's query and parameters as the Data API's SQL (``:name`` placeholders, casts where
    the value's type needs one) and its parameter list."""
    if isinstance(query, sql.Composable):
        query = query.as_string(None)
    if isinstance(query, bytes | bytearray | memoryview):
        query = bytes(query).decode()
    text = str(query)
    if params is None:
        return text, []  # as psycopg: without parameters, % is no placeholder
    by_name = isinstance(params, Mapping)
    values: list[tuple[str, Any]] = []
    seen: dict[str, tuple[dict[str, Any], str | None]] = {}
    position = 0

    def placeholder(match: re.Match[str]) -> str:
        nonlocal position
        name, fmt = match.group(1), match.group(2)
        if fmt == "%" and name is None:
            return "%"
        if fmt not in "sbt":
            raise psycopg.ProgrammingError(f"only '%s', '%b', '%t' are allowed as placeholders, got '%{fmt}'")
        if by_name:
            if name is None:
                raise psycopg.ProgrammingError("positional placeholder in a query with named parameters")
            if not _NAME.match(name):
                raise psycopg.ProgrammingError(f"parameter name {name!r} is not an identifier")
            assert isinstance(params, Mapping)
            key, value = name, params[name]
        else:
            if name is not None:
                raise psycopg.ProgrammingError("named placeholder in a query with positional parameters")
            assert not isinstance(params, Mapping)
            if position >= len(params):
                raise psycopg.ProgrammingError(f"the query has more placeholders than the {len(params)} parameters")
            key, value = f"p{position + 1}", params[position]
            position += 1
        if key not in seen:
            seen[key] = _parameter(key, value)
            values.append((key, value))
        cast = seen[key][1]
        return f"CAST(:{key} AS {cast})" if cast else f":{key}"

    converted = _PLACEHOLDER.sub(placeholder, text)
    if not by_name and position != len(params):
        raise psycopg.ProgrammingError(
            f"the query has {position} placeholders but {len(params)} parameters were passed"
        )
    return converted, [seen[key][0] for key, _ in values]


def split_script(script: str) -> list[str]:
    """A script's statements (the Data API runs one per call; a migration file has many): split at
    semicolons outside literals, quoted names, dollar-quoted bodies and comments."""
    statements, start, i, n = [], 0, 0, len(script)
    while i < n:
        c = script[i]
        if c in "'\"":
            i = script.find(c, i + 1)
            while i != -1 and i + 1 < n and script[i + 1] == c:
                i = script.find(c, i + 2)
            i = n if i == -1 else i + 1
        elif c == "$" and (tag := re.match(r"\$(?:[A-Za-z_]\w*)?\$", script[i:])):
            end = script.find(tag.group(0), i + len(tag.group(0)))
            i = n if end == -1 else end + len(tag.group(0))
        elif script.startswith("--", i):
            i = n if (end := script.find("\n", i)) == -1 else end
        elif script.startswith("/*", i):
            i = n if (end := script.find("*/", i + 2)) == -1 else end + 2
        elif c == ";":
            statements.append(script[start:i])
            start = i = i + 1
        else:
            i += 1
    statements.append(script[start:])
    return [s.strip() for s in statements if _has_code(s)]


def _has_code(statement: str) -> bool:
    without = re.sub(r"--[^\n]*|/\*.*?\*/", "", statement, flags=re.S)
    return bool(without.strip())


# ---- results: Data API fields -> what psycopg gives -------------------------------------------


def _timestamp(text: str, aware: bool) -> dt.datetime:
    value = dt.datetime.fromisoformat(text.replace(" ", "T", 1))
    if aware and value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)  # the Data API answers in the session's time zone, UTC
    return value


def decode_scalar(type_name: str, field: Mapping[str, Any]) -> Any:
    if field.get("isNull"):
        return None
    if "stringValue" in field:
        return _from_text(type_name, field["stringValue"])
    if "longValue" in field:
        return int(field["longValue"])
    if "doubleValue" in field:
        return float(field["doubleValue"])
    if "booleanValue" in field:
        return bool(field["booleanValue"])
    if "blobValue" in field:
        return bytes(field["blobValue"])
    if "arrayValue" in field:
        return _array(type_name.removeprefix("_"), field["arrayValue"])
    return None


# A text field's value by its column's type name (any other: the text itself).
_FROM_TEXT: dict[str, Callable[[str], Any]] = {
    "timestamptz": lambda text: _timestamp(text, aware=True), "timestamp": lambda text: _timestamp(text, aware=False),
    "date": dt.date.fromisoformat, "uuid": uuid.UUID, "json": json.loads, "jsonb": json.loads,
    "numeric": decimal.Decimal, "vector": Vector.from_text, "halfvec": HalfVector.from_text,
    "int2": int, "int4": int, "int8": int, "oid": int, "float4": float, "float8": float,
    "bool": lambda text: text in ("t", "true"),
}  # fmt: skip


def _from_text(type_name: str, text: str) -> Any:
    convert = _FROM_TEXT.get(type_name.lower())
    return text if convert is None else convert(text)


def _array(element: str, value: Mapping[str, Any]) -> list[Any]:
    if "arrayValues" in value:
        return [_array(element, v) for v in value["arrayValues"]]
    for key in ("stringValues", "longValues", "doubleValues", "booleanValues"):
        if key in value:
            items = value[key]
            if key == "stringValues":
                return [None if v is None else _from_text(element, v) for v in items]
            return list(items)
    return []
