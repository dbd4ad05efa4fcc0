"""The Open Memory Specification's grains (OMS 1.x, "Memory Grain" container), to import lines
and back.

A memory is a Fact grain: ``subject`` the user, ``relation`` its category, ``object`` its text;
its times are the spec's bi-temporal fields in Unix milliseconds (``valid_from``/``valid_to``:
when the fact held; ``system_valid_from``/``system_valid_to``: when the store held it current,
ended by a supersession). The spec's ``superseded_by`` is a grain's content address (SHA-256 of
its canonical MessagePack blob), which this JSON form does not compute; what makes an export an
exact copy (our id, what superseded it, the source, project and metadata) travels in ``context``,
the grain's string-to-string map, under ``rushmem_*`` keys. Grains from elsewhere are read by the
spec's fields: a Fact's triple as one sentence, an Episode's content; compacted keys ("s", "vf")
are read as their full names (spec §6.1). Other grain types hold no memory text and are refused.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from rushmem_contract.models import CATEGORIES, ImportLine
from rushmem_tools.formats import Record, Refused, each, parse_document, records_of, required_text, text_field

SOURCE = "oms"
# OMS §6.1/§6.2: the full names of the short keys a compacted grain carries.
SHORT_KEYS = {
    "t": "type",
    "s": "subject",
    "r": "relation",
    "o": "object",
    "c": "confidence",
    "st": "source_type",
    "ca": "created_at",
    "tt": "temporal_type",
    "vf": "valid_from",
    "vt": "valid_to",
    "svf": "system_valid_from",
    "svt": "system_valid_to",
    "ctx": "context",
    "sb": "superseded_by",
    "ct": "contradicted",
    "im": "importance",
    "adid": "author_did",
    "ns": "namespace",
    "user": "user_id",
    "tags": "structural_tags",
    "df": "derived_from",
    "pc": "provenance_chain",
}
# Our sources as the spec's source_type, an open enum: its common values where one says the same,
# else the door the memory came through (api, mcp, sqs, ...), as our source names it.
SOURCE_TYPES = {"consolidate": "consolidated", "import": "imported", "mem0": "imported", "oms": "imported"}
PREFIX = "rushmem_"  # context keys of ours
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
TIMES = ("created_at", "valid_from", "valid_until", "superseded_at")  # ours the spec has, in ms
GRAINS = uuid.UUID("5a0d3f9e-2c1b-4e8a-9f67-0b5c8d2e4a13")  # the uuid5 namespace of imported grains' ids


def _ms(value: dt.datetime | None) -> int | None:
    # In integers: a float's product can land a millisecond short.
    return None if value is None else (value - EPOCH) // dt.timedelta(milliseconds=1)


def _finer_than_ms(line: ImportLine) -> str | None:
    """Our times the spec's milliseconds would round (ISO, as JSON), so a round trip keeps them exact."""
    times = {n: getattr(line, n) for n in TIMES if getattr(line, n) is not None and getattr(line, n).microsecond % 1000}
    return json.dumps({n: t.isoformat() for n, t in times.items()}) if times else None


def _time(grain: dict[str, Any], name: str) -> str | None:
    value = grain.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"{name}: Unix milliseconds (an integer) were expected, not {value!r}")
    try:
        return (EPOCH + dt.timedelta(milliseconds=value)).isoformat()
    except OverflowError:
        raise Refused(f"{name}: {value} is out of range for a time") from None


def write(lines: Iterable[ImportLine]) -> Iterator[dict[str, Any]]:
    """Each export line as a Fact grain (a dict in the spec's JSON form)."""
    for line in lines:
        context = {
            f"{PREFIX}id": str(line.id) if line.id else None,
            f"{PREFIX}source": line.source,
            f"{PREFIX}project_id": line.project_id,
            f"{PREFIX}superseded_by": str(line.superseded_by) if line.superseded_by else None,
            f"{PREFIX}updated_at": line.updated_at.isoformat() if line.updated_at else None,
            f"{PREFIX}expires_at": line.expires_at.isoformat() if line.expires_at else None,
            f"{PREFIX}evergreen": "true" if line.is_evergreen else None,
            f"{PREFIX}metadata": json.dumps(line.metadata, ensure_ascii=False) if line.metadata else None,
            f"{PREFIX}exact_times": _finer_than_ms(line),
        }
        grain: dict[str, Any] = {
            "type": "fact",
            "subject": line.user_id,
            "relation": line.category,
            "object": line.content,
            "confidence": 1.0,
            "source_type": SOURCE_TYPES.get(line.source or "", line.source or "system"),
            "created_at": _ms(line.created_at),
            "temporal_type": "state",
            "valid_from": _ms(line.valid_from),
            "valid_to": _ms(line.valid_until),
            "system_valid_from": _ms(line.created_at),
            "system_valid_to": _ms(line.superseded_at),
            "namespace": line.project_id or "shared",
            "user_id": line.user_id,
            "context": {k: v for k, v in context.items() if v is not None},
        }
        yield {k: v for k, v in grain.items() if v is not None}  # the spec omits nulls (§4)


def read(text: str, *, user_id: str | None = None, project_id: str | None = None) -> Iterator[Record]:
    """Each grain as an import line (or why not). ``user_id``: the owner of grains naming none."""
    grains = records_of(parse_document(text, "OMS"), ("grains",), "OMS")
    return each(grains, lambda grain: _line({SHORT_KEYS.get(k, k): v for k, v in grain.items()}, user_id, project_id))


def _line(grain: dict[str, Any], user_id: str | None, project_id: str | None) -> dict[str, Any]:
    kind = text_field(grain, "type", required=True)
    context = grain.get("context") or {}
    if not isinstance(context, dict) or not all(isinstance(v, str) for v in context.values()):
        raise Refused("context: a map of strings was expected (OMS §8.1)")
    ours = {k.removeprefix(PREFIX): v for k, v in context.items() if k.startswith(PREFIX)}
    if kind == "fact":
        subject, relation, obj = (required_text(grain, name) for name in ("subject", "relation", "object"))
        mine = "id" in ours and relation in CATEGORIES
        content = obj if mine else f"{subject} {relation.replace('_', ' ')} {obj}"
        category = relation if mine else "fact"
    elif kind == "episode":
        content = required_text(grain, "content")
        category = "other"
    else:
        raise Refused(f"type: a {kind} grain holds no memory text (fact and episode grains are imported)")
    owner = text_field(grain, "user_id") or user_id
    if owner is None:
        raise Refused("user_id: missing (the grain names no user: pass --user to name its owner)")
    line: dict[str, Any] = {"user_id": owner, "content": content, "category": category}
    created = _time(grain, "created_at") or _time(grain, "system_valid_from")
    if created is not None:
        line["created_at"] = created
    valid_from = _time(grain, "valid_from")
    if valid_from is not None:
        line["valid_from"] = valid_from
    # valid_to is when the fact stopped holding (our valid_until); system_valid_to when the store
    # stopped holding it current, superseded or retracted (our superseded_at): the same two times.
    valid_to, retired = _time(grain, "valid_to"), _time(grain, "system_valid_to")
    if valid_to is not None:
        line["valid_until"] = valid_to
    if "id" in ours:
        line.update(_restored(ours))
    else:
        # An id from the grain itself: the same file imported twice stores nothing twice, and the
        # line is restored as stated (its times kept) rather than folded into a live fact.
        line["id"] = str(uuid.uuid5(GRAINS, json.dumps(grain, sort_keys=True, ensure_ascii=False)))
        line["source"] = SOURCE
        line["metadata"] = {SOURCE: _provenance(grain)}
        if retired is None and (grain.get("superseded_by") or grain.get("contradicted") is True):
            # Superseded or contradicted elsewhere, with no time for it: retired when it stopped
            # holding, else when it was written.
            retired = valid_to or line.get("created_at") or line.get("valid_from")
            if retired is None:
                raise Refused("system_valid_to: a superseded or contradicted grain needs a time it ended")
    if retired is not None:
        line["superseded_at"] = retired
    if "exact_times" in ours:  # ours, finer than the spec's milliseconds
        line.update(_exact_times(ours["exact_times"]))
    if project_id is not None or "project_id" in ours:
        line["project_id"] = ours.get("project_id") or project_id
    return line


def _restored(ours: dict[str, str]) -> dict[str, Any]:
    """What an export of ours carried in context, back on the line (an exact copy)."""
    line: dict[str, Any] = {"id": ours["id"]}
    for name in ("source", "updated_at", "expires_at", "superseded_by"):
        if name in ours:
            line[name] = ours[name]
    if ours.get("evergreen") == "true":
        line["is_evergreen"] = True
    if "metadata" in ours:
        try:
            line["metadata"] = json.loads(ours["metadata"])
        except ValueError:
            raise Refused(f"context.{PREFIX}metadata: not JSON") from None
    return line


def _exact_times(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise Refused(f"context.{PREFIX}exact_times: not JSON") from None
    if not isinstance(value, dict):
        raise Refused(f"context.{PREFIX}exact_times: an object of times was expected")
    return {k: v for k, v in value.items() if k in TIMES}


def _provenance(grain: dict[str, Any]) -> dict[str, Any]:
    """What the grain said of where it came from, kept in the memory's metadata."""
    kept = ("type", "subject", "relation", "source_type", "namespace", "author_did", "confidence", "superseded_by")
    return {k: grain[k] for k in kept if grain.get(k) is not None}
