"""What extraction produces and is shown: memory records as a model returns them (tolerantly
validated), the existing memories it may refer to under short handles, and the expiry bounds.

An LLM extractor may be shown the user's existing memories most related to the conversation
(under short handles, "m1", "m2", ...) and say, per fact, that it restates one of them or
replaces some; :mod:`.updates` maps the handles back and applies the guards.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import re
from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from rushmem_contract.models import CATEGORIES, Category, ChatMessage, Content, NewMemory, fact_key

logger = logging.getLogger(__name__)

# The longest an extracted fact may last: further out is a model's mistake, not a plan.
MAX_EXPIRY = dt.timedelta(days=5 * 366)
_HANDLE = re.compile(r"^\W*m\s*(\d{1,4})\W*$", re.IGNORECASE)
_NO_REFERENCE = {"", "null", "none", "new", "n/a", "-"}


def _category(value: Any) -> Any:
    """Case and spacing don't matter; a category outside the list becomes 'other' (the fact is kept)."""
    if isinstance(value, str):
        name = value.strip().lower()
        return name if name in CATEGORIES else "other"
    return value


def _reference(value: Any) -> str | None:
    """A handle as the model wrote it: "m3", "M3", "[m3]" and 3 all mean "m3"; anything else is
    kept as written (it matches no handle, so it is logged and ignored later)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return f"m{value}"
    text = str(value).strip()
    if text.lower() in _NO_REFERENCE:
        return None
    match = _HANDLE.match(text)
    return f"m{int(match.group(1))}" if match else text[:80]


def _one_reference(value: Any) -> str | None:
    if isinstance(value, list | tuple):
        found = [r for r in map(_reference, value) if r]
        if len(found) > 1:
            logger.warning("a fact restates %d memories; keeping the first reference %r", len(found), found[0])
        return found[0] if found else None
    return _reference(value)


def _references(value: Any) -> list[str]:
    items = value if isinstance(value, list | tuple) else [value]
    return list(dict.fromkeys(r for r in map(_reference, items) if r))  # once each, in order


def _expiry(value: Any) -> dt.datetime | None:
    """An ISO date or date-time. A date means "through that day": the fact ends at the next
    midnight (UTC). Naive times are UTC. Anything else is dropped with a log line (the fact is kept)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _NO_REFERENCE | {"never"}):
        return None
    try:
        moment = _moment(value)
    except (ValueError, OverflowError):  # not a date, or the day after 9999-12-31
        moment = None
    if moment is None:
        logger.warning("expires_at %r is not an ISO date; the fact is kept without it", str(value)[:40])
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def _moment(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, str) and len(value.strip()) == 10:  # YYYY-MM-DD
        value = dt.date.fromisoformat(value.strip())
    if isinstance(value, dt.date):
        return dt.datetime.combine(value + dt.timedelta(days=1), dt.time())
    if isinstance(value, str):
        return dt.datetime.fromisoformat(value.strip().upper().replace("Z", "+00:00"))
    return None


def fact_reference(content: str) -> str:
    """How a memory's ``depends_on`` names another fact of the same extraction once it is parsed:
    by its content (a digest), which survives the steps that drop facts; the model writes "f2"."""
    return "fact:" + hashlib.sha256(fact_key(content).encode()).hexdigest()[:16]


class ExtractedMemory(BaseModel):
    """One memory record as an extractor returns it: ``{content, category, is_evergreen}``, and
    optionally ``expires_at`` and what it says about the existing memories it was shown:
    ``restates`` (one handle) or ``replaces`` (handles)."""

    model_config = ConfigDict(extra="ignore")

    content: Content = Field(validation_alias=AliasChoices("content", "memory", "fact", "text"))
    category: Annotated[Category, BeforeValidator(_category)] = "fact"
    is_evergreen: bool = Field(default=False, validation_alias=AliasChoices("is_evergreen", "evergreen"))
    expires_at: Annotated[dt.datetime | None, BeforeValidator(_expiry)] = Field(
        default=None, validation_alias=AliasChoices("expires_at", "expires", "valid_until")
    )
    restates: Annotated[str | None, BeforeValidator(_one_reference)] = Field(
        default=None, validation_alias=AliasChoices("restates", "same_as")
    )
    replaces: Annotated[list[str], BeforeValidator(_references)] = Field(
        default_factory=list, validation_alias=AliasChoices("replaces", "supersedes")
    )
    # What the fact follows from: existing memories ("m2") or earlier facts of the same answer
    # ("f1", by position); rushmem.extraction.updates maps them and drops the others.
    depends_on: Annotated[list[str], BeforeValidator(_references)] = Field(
        default_factory=list, validation_alias=AliasChoices("depends_on", "follows_from", "dependsOn")
    )
    # The category as the extractor named it, before it became a built-in one: a project's own
    # category (see rushmem_contract.instructions) is matched on it, then kept in ``label``.
    named_category: str | None = Field(default=None, exclude=True)
    label: str | None = None
    # Where the fact was said, set by the extractor itself (never read from a model's answer: the
    # aliases are no JSON key a model writes): the index of its message among those extracted from
    # (the last one that said it), and that message's time. Within one conversation the later
    # statement of a slot supersedes the earlier (rushmem.ingest.conversation).
    turn: int | None = Field(default=None, validation_alias="__turn__", exclude=True)
    stated_at: dt.datetime | None = Field(default=None, validation_alias="__stated_at__", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _keep_named_category(cls, data: Any) -> Any:
        # Both are the service's: an extractor's answer never sets them directly.
        if isinstance(data, dict):
            named = data.get("category")
            data = {k: v for k, v in data.items() if k not in ("named_category", "label")}
            data["named_category"] = named.strip().lower()[:80] if isinstance(named, str) else None
        return data

    def to_new_memory(self, extracted_by: str, metadata: dict[str, Any] | None = None) -> NewMemory:
        extra: dict[str, Any] = {**(metadata or {}), "extracted_by": extracted_by}
        if self.label is not None:
            extra["categories"] = [self.label]
        return NewMemory(
            content=self.content,
            category=self.category,
            is_evergreen=self.is_evergreen,
            expires_at=self.expires_at,
            metadata=extra,
            # The fact became true when it was said (else when the conversation ended).
            created_at=self.stated_at,
        )


class Extraction(BaseModel):
    """What an extractor kept, and why it dropped the rest (one reason per dropped item)."""

    memories: list[ExtractedMemory] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)


def bound_expiry(extraction: Extraction, reference: dt.datetime) -> None:
    """Keep only expiries after ``reference`` (when the conversation ended) and at most
    MAX_EXPIRY later; drop the others (the facts stay), with a log line each."""
    latest = reference + MAX_EXPIRY if reference.year < dt.MAXYEAR - 10 else dt.datetime.max.replace(tzinfo=dt.UTC)
    for index, memory in enumerate(extraction.memories):
        when = memory.expires_at
        if when is None:
            continue
        if when <= reference or when > latest:
            problem = "not after the conversation ended" if when <= reference else "more than 5 years later"
            logger.warning(
                "extracted item %d: expires_at %s dropped (%s at %s); the fact is kept",
                index,
                when.isoformat(),
                problem,
                reference.isoformat(),
            )
            extraction.memories[index] = memory.model_copy(update={"expires_at": None})


# Words that say nothing of which message a fact came from (the rewrite to the third person adds them).
_FILLER = frozenset(
    re.findall(
        r"\S+",
        "the a an user user's users and or of to in on at for with is are was were has have had be been that this "
        "i i'm i've my me we our you your it its now actually also",
    )
)
_WORD = re.compile(r"[\w']+")


def _said(text: str) -> set[str]:
    """A text's words, roughly rooted ("lives" / "live", "moved" / "move"), fillers left out."""
    words = (w.casefold().replace("’", "'") for w in _WORD.findall(text))
    return {w[:5] if len(w) > 5 else w for w in words if w not in _FILLER}


def place_in_conversation(extraction: Extraction, messages: Sequence[ChatMessage]) -> Extraction:
    """Each extracted memory with the turn that said it and that message's time, as the rules
    extractor gives them (a model is never asked for them, nor trusted with them): the user message
    sharing the most words with the fact, the later one on a tie (the last that said it); none when
    no user message shares a word (the conversation's end then dates it)."""
    said = [(i, _said(m.content), m.created_at) for i, m in enumerate(messages) if m.role == "user"]
    placed = []
    for memory in extraction.memories:
        words = _said(memory.content)
        best = max(said, key=lambda s: (len(words & s[1]), s[0]), default=None)
        if best is None or not words & best[1]:
            placed.append(memory)
            continue
        placed.append(memory.model_copy(update={"turn": best[0], "stated_at": best[2]}))
    extraction.memories = placed
    return extraction
