"""A tool's input schema as the model reads it: what pydantic generates from the request's fields,
without what costs tokens on every turn and tells the model nothing.

The schema a host sends to the model with every turn is the tool's ``inputSchema`` from
``tools/list``; pydantic's own carries a generated ``title`` per field ("Project Id" beside
``project_id``), ``anyOf [X, null]`` with ``default: null`` for every optional field, and shared
models as ``$defs`` with docstrings written for programmers. Arguments are validated by the
operation's request model (:meth:`rushmem_contract.operations.Operation.build`), never against this
schema, so compacting it changes what the model reads, not what the server accepts: a value the
compact schema leaves out (a null for "not given", one fact instead of a list of one, a field a
tool hides) is still accepted as every door accepts it, and a text longer than a size the schema
no longer states is refused as every door refuses it, naming the field.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from typing import Any

_NULL = {"type": "null"}
# Generated titles, and the sizes of strings and lists: the request model checks them (a model's
# short sentence or id never meets them, and one that did gets the refusal naming the field).
_UNREAD = frozenset({"title", "minLength", "maxLength", "minItems", "maxItems"})


def compact(schema: dict[str, Any], *, nullable: Collection[str] = (), hidden: Collection[str] = ()) -> dict[str, Any]:
    """``schema`` (an object schema, pydantic's) compacted (see the module's docstring):

    - every ``$ref`` replaced by its definition (without the definition's description: the field's
      says what it is for in this tool), and ``$defs`` dropped;
    - no generated ``title``s, and no sizes of strings or lists (``maxLength``, ``minItems``, ...);
    - an optional field whose default is null is its type without the null (leaving it out is
      "not given"), but the fields named in ``nullable``, whose null means something (an update's
      ``expires_at: null``: never expires);
    - "one of these, or a list of them" is the list;
    - ``additionalProperties: true`` (the default) dropped;
    - ``hidden`` dotted names (``memories.created_at``) leave out a field of a nested object.
    """
    within: dict[str, set[str]] = {}
    for name in hidden:
        outer, _, inner = name.partition(".")
        if inner:
            within.setdefault(outer, set()).add(inner)
    defs = schema.get("$defs", {})
    top = copy.deepcopy({k: v for k, v in schema.items() if k != "$defs"})
    out: dict[str, Any] = _node(top, defs, keep_null=nullable, within=within)
    return out


def _node(
    node: Any, defs: Mapping[str, Any], keep_null: Collection[str] = (), within: Mapping[str, set[str]] | None = None
) -> Any:
    if isinstance(node, list):
        return [_node(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = {k: v for k, v in defs[node["$ref"].rsplit("/", 1)[-1]].items() if k != "description"}
        node = {**copy.deepcopy(target), **{k: v for k, v in node.items() if k != "$ref"}}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _UNREAD or (key == "additionalProperties" and value is True):
            continue
        if key == "properties":
            out[key] = {
                name: _without(_field(prop, defs, name in keep_null), (within or {}).get(name, set()))
                for name, prop in value.items()
            }
        else:
            out[key] = _node(value, defs)
    return _one_or_list(out)


def _field(prop: dict[str, Any], defs: Mapping[str, Any], keep_null: bool) -> Any:
    """A property: optional with a null default made plain, unless its null means something."""
    options = prop.get("anyOf")
    if not keep_null and "default" in prop and prop["default"] is None and isinstance(options, list):
        rest = [o for o in options if o != _NULL]
        if len(rest) < len(options):
            prop = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
            prop = {**rest[0], **prop} if len(rest) == 1 else {"anyOf": rest, **prop}
    return _node(prop, defs)


def _without(node: Any, names: set[str]) -> Any:
    """``node`` without the fields ``names`` in any object it is or holds (a list's items, a choice)."""
    if not names or not isinstance(node, dict):
        return node
    out = dict(node)
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: v for k, v in out["properties"].items() if k not in names}
        if "required" in out:
            out["required"] = [k for k in out["required"] if k not in names]
    if "items" in out:
        out["items"] = _without(out["items"], names)
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [_without(option, names) for option in out["anyOf"]]
    return out


def _one_or_list(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf [A, B, array of (A or B)]`` as the array alone."""
    options = node.get("anyOf")
    if not isinstance(options, list):
        return node
    arrays = [o for o in options if isinstance(o, dict) and o.get("type") == "array"]
    if len(arrays) != 1:
        return node
    others = [o for o in options if o is not arrays[0]]
    items = arrays[0].get("items", {})
    if items.get("anyOf", [items]) != others:
        return node
    return {**{k: v for k, v in node.items() if k != "anyOf"}, **arrays[0]}
