"""Conversation exports to "conversation ended" messages, which extraction turns into memories.

ChatGPT's data export (``conversations.json``): a list of conversations, each a ``mapping`` of
nodes (``{"id", "message", "parent", "children"}``) whose messages carry ``author.role``,
``content.parts`` and ``create_time`` (Unix seconds); the branch shown is the path from
``current_node`` up to the root (edits and regenerations are other branches, left out). Also
taken: a list of ``{"role", "content"}`` messages (one conversation), or a list of
``{"messages": [...]}`` conversations. Only the user's and the assistant's text turns are kept
(hidden system prompts, tool output and images say nothing the user stated).

A conversation is cut into windows of ``window`` messages (what extraction reads at once), each
message ended when its last turn was written, so every fact is extracted and dated by its turn.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

from rushmem_contract.errors import InvalidInput
from rushmem_tools.formats import Refused, parse_document

ROLES = ("user", "assistant")


def read(
    text: str, *, user_id: str, window: int, project_id: str | None = None
) -> Iterator[tuple[int, list[dict[str, Any]] | str]]:
    """Each conversation's "conversation ended" messages (dicts for ConversationEnded), or why it
    has none; numbered by the conversation's place in the file."""
    value = parse_document(text, "chat export")
    conversations: list[Any]
    if isinstance(value, list) and value and all(isinstance(v, dict) and "role" in v for v in value):
        conversations = [{"messages": value}]  # one conversation, as a bare list of messages
    elif isinstance(value, list):
        conversations = value
    elif isinstance(value, dict):
        conversations = [value]
    else:
        raise InvalidInput(f"the chat export holds {type(value).__name__}, not conversations", field="file")
    for number, conversation in enumerate(conversations, start=1):
        try:
            if not isinstance(conversation, dict):
                raise Refused(f"not an object ({type(conversation).__name__})")
            turns = _turns(conversation)
            if not turns:
                raise Refused("no user or assistant text in it")
            yield number, _messages(conversation, number, turns, user_id, window, project_id)
        except Refused as exc:
            yield number, f"conversation {number}: {exc}"


def _messages(
    conversation: dict[str, Any],
    number: int,
    turns: list[dict[str, Any]],
    user_id: str,
    window: int,
    project_id: str | None,
) -> list[dict[str, Any]]:
    name = conversation.get("conversation_id") or conversation.get("id")
    base = name if isinstance(name, str) and name else f"chat-{number}"
    fallback = _seconds(conversation, "update_time") or _seconds(conversation, "create_time")
    out = []
    for start in range(0, len(turns), window):
        chunk = turns[start : start + window]
        ended = next((t["created_at"] for t in reversed(chunk) if t.get("created_at")), fallback)
        message: dict[str, Any] = {
            "user_id": user_id,
            "conversation_id": f"{base}#{start // window + 1}" if len(turns) > window else base,
            "messages": chunk,
        }
        if ended is not None:
            message["ended_at"] = ended
        if project_id is not None:
            message["project_id"] = project_id
        out.append(message)
    return out


def _turns(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    if "mapping" in conversation:
        return _branch(conversation)
    messages = conversation.get("messages")
    if not isinstance(messages, list):
        raise Refused("messages: a list was expected (or ChatGPT's mapping)")
    turns = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise Refused(f"messages[{i}]: not an object")
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str):
            raise Refused(f"messages[{i}].role: missing")
        if not isinstance(content, str):
            raise Refused(f"messages[{i}].content: a string was expected")
        if role in ROLES and content.strip():
            turn: dict[str, Any] = {"role": role, "content": content}
            if message.get("created_at") is not None:
                turn["created_at"] = message["created_at"]
            turns.append(turn)
    return turns


def _branch(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages of the branch ChatGPT shows: current_node up to the root, then in order."""
    mapping = conversation["mapping"]
    if not isinstance(mapping, dict):
        raise Refused("mapping: an object of nodes was expected")
    node_id = conversation.get("current_node")
    if not isinstance(node_id, str) or node_id not in mapping:
        # No current node: the last leaf written (a branch's end with no children).
        leaves = [k for k, n in mapping.items() if isinstance(n, dict) and not n.get("children")]
        if not leaves:
            raise Refused("current_node: missing, and the mapping has no leaf")
        node_id = leaves[-1]
    path: list[dict[str, Any]] = []
    seen: set[str] = set()
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise Refused(f"mapping.{node_id}: not an object")
        path.append(node)
        node_id = node.get("parent")
    turns = []
    for node in reversed(path):
        message = node.get("message")
        if not isinstance(message, dict):
            continue  # the root holds none
        author = message.get("author")
        role = author.get("role") if isinstance(author, dict) else None
        content = message.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if role not in ROLES or not isinstance(parts, list):
            continue
        text = "\n".join(p for p in parts if isinstance(p, str)).strip()  # images are objects
        meta = message.get("metadata")
        if not text or (isinstance(meta, dict) and meta.get("is_visually_hidden_from_conversation")):
            continue
        turn: dict[str, Any] = {"role": role, "content": text}
        when = _seconds(message, "create_time")
        if when is not None:
            turn["created_at"] = when
        turns.append(turn)
    return turns


def _seconds(record: dict[str, Any], name: str) -> str | None:
    value = record.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Refused(f"{name}: Unix seconds were expected, not {value!r}")
    try:
        return dt.datetime.fromtimestamp(value, dt.UTC).isoformat()
    except (OverflowError, OSError, ValueError):
        raise Refused(f"{name}: {value} is out of range for a time") from None
