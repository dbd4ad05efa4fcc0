"""The input shapes people send, read one way at every door: where a request takes a list of
facts, one string is one fact and a string item is a fact's content; chat messages given where
facts go (mem0's ``add(messages)``) are messages. Used by the request models' validators, so the
HTTP API, MCP, the CLI, both Python clients, the TypeScript client and in-process calls agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _is_message(item: object) -> bool:
    """A chat message as agent frameworks pass them: an object with a ``role`` (a pydantic
    model of one too, read through its attributes)."""
    if isinstance(item, Mapping):
        return "role" in item
    return hasattr(item, "role") and hasattr(item, "content") and not hasattr(item, "category")


def _one_object(value: object) -> bool:
    """One object: a mapping, or a pydantic model (a NewMemory, a chat message) given in-process."""
    return isinstance(value, Mapping) or hasattr(value, "model_dump")


def as_facts(value: Any) -> Any:
    """Facts as a list: one string (or one object) is a list of one, a string item is a fact's
    content. Anything else is left to the model to refuse."""
    if isinstance(value, str) or _one_object(value):
        value = [value]
    if isinstance(value, list | tuple):
        return [{"content": item} if isinstance(item, str) else item for item in value]
    return value


def not_a_message(data: Any) -> Any:
    """A fact that is a chat message is one among facts (all of them would have become messages):
    refused, naming its place."""
    if isinstance(data, Mapping) and _is_message(data):
        raise ValueError("is a chat message among facts: give either chat messages or facts, not both")
    return data


def chat_in_memories(data: Any) -> Any:
    """A request whose ``memories`` are all chat messages carries them as ``messages``. A mix of
    messages and facts stays as it is, for the model to refuse item by item."""
    if not isinstance(data, Mapping) or "messages" in data:
        return data
    items = data.get("memories")
    if _one_object(items):
        items = [items]
    if isinstance(items, list | tuple) and items and all(_is_message(item) for item in items):
        return {**{k: v for k, v in data.items() if k != "memories"}, "messages": list(items)}
    return data


def changes_given_whole(data: Any) -> Any:
    """An update whose changes come as one value (``data``: mem0's ``update(id, data)``; or
    ``changes``): a text is the new content, a mapping or a model the fields to change."""
    if not isinstance(data, Mapping) or not ({"data", "changes"} & set(data)):
        return data
    out = {k: v for k, v in data.items() if k not in ("data", "changes")}
    for key in ("changes", "data"):
        value = data.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            out.setdefault("content", value)
        elif isinstance(value, Mapping):
            out = {**value, **out}
        elif hasattr(value, "model_dump"):
            out = {**value.model_dump(exclude_unset=True), **out}
        else:
            out[key] = value  # for the model to refuse, naming it
    return out
