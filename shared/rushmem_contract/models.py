"""pydantic models shared by the CLI, the handlers and the service."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import unicodedata
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from rushmem_contract import shapes
from rushmem_contract.errors import InputTooLarge, InvalidInput
from rushmem_contract.inputs import (
    JsonValueError,
    as_stored,
    cut_deep,
    field_path,
    has_visible,
    inspect_json,
    visible_strings,
    visible_text,
)

Category = Literal["identity", "preference", "project", "decision", "fact", "other"]
CATEGORIES: tuple[str, ...] = get_args(Category)

# Hard ceilings of the wire format; the configurable (smaller) limits live in Settings.
MAX_ID_CHARS = 256
# A memory is one row, and its history event ("updated": the new content, the previous content and
# the previous metadata) another: each must stay under the RDS Data API's 64 KB a row (65,536 bytes),
# counted as the row travels, where every character may take 4 bytes (a 4-byte UTF-8 character, or
# a quote escaped twice). 4 x (2 x 5,000 + 4,000) = 56,000 bytes, plus the ids (3 x 256 characters),
# times and keys: under 64 KB (tests/integration/test_data_api_limits.py writes the largest).
MAX_CONTENT_CHARS = 5_000
# A chat turn is never stored (the facts extracted from it are, each within MAX_CONTENT_CHARS).
MAX_MESSAGE_CHARS = 20_000
MAX_MESSAGES = 1000
MAX_METADATA_CHARS = 4_000
# Past ~250 levels pydantic cannot serialize a value (every read of it would fail); the
# configured limits (Settings.max_metadata_*) are smaller.
MAX_METADATA_DEPTH = 32
MAX_METADATA_KEYS = 4_000
# Ceilings of the API's paging parameters (recall's default limit is a setting).
MAX_RECALL_LIMIT = 50
MAX_BLOCK_TOKENS = 100_000  # a recall's token budget: far beyond any block MAX_RECALL_LIMIT memories make
MAX_PAGE = 500
DEFAULT_PAGE = 100
MAX_CURSOR_CHARS = 512
MAX_HISTORY = 10_000
DEFAULT_HISTORY_PAGE = 1000  # events per history page unless asked (bytes may stop it first)
# Lambda refuses a synchronous answer over 6 MB (6,291,456 bytes), counted on the invocation's JSON
# result, where the body is a string and each of its quotes and backslashes is escaped. A page
# (list, export) stops at this many bytes of its items as they sit in that result, whatever its
# limit, and its cursor carries on from the last item it holds; the rest of the 6 MB is the
# envelope's and the headers'.
MAX_PAGE_BYTES = 5 * 1024 * 1024
LAMBDA_RESPONSE_BYTES = 6 * 1024 * 1024
# An export line's history, from its first event, stops at this many bytes of events (their content
# and detail as answered, an edit's previous metadata whole; the first event always): a memory
# edited thousands of times still fits a page, with ``history_cursor`` where its history goes on.
EXPORT_HISTORY_BYTES = 256 * 1024
MAX_SUPERSEDES = 100
MAX_DEPENDS_ON = 20


def _path_of(loc: Sequence[Any], prefix: str | None = None) -> str:
    path = field_path([p for p in loc if isinstance(p, str | int)])
    if not prefix:
        return path
    return f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}" if path else prefix


# mem0's keywords that are named otherwise here (by the field's path, or its last name): a request
# that uses one is refused with the name to use (docs/api.md, "Coming from mem0").
MEM0_WORDS = {
    "filters.user_id": "the user is user_id=, beside filters, not in them",
    "top_k": "mem0's top_k is limit here",
    "text": "mem0's text is content here",
    "expiration_date": "mem0's expiration_date is expires_at here",
    "agent_id": "mem0's agent_id is project_id (or metadata) here",
    "run_id": "mem0's run_id is metadata here",
}


def _message(error: Mapping[str, Any]) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if error.get("type") == "extra_forbidden":
        path = _path_of(error["loc"])
        hint = MEM0_WORDS.get(path) or MEM0_WORDS.get(path.rsplit(".", 1)[-1])
        if hint is not None:
            return f"{message} ({hint})"
    return message


def describe_errors(
    exc: ValidationError | Sequence[Mapping[str, Any]], whole: str = "value", prefix: str | None = None
) -> str:
    """Validation errors as one line, field by field ("memories[0].content: ..."), never echoing
    input; ``whole`` names the value when the error is about it as a whole, ``prefix`` is where
    the value sits in a larger request; an unknown field that is one of mem0's words names ours."""
    errors = exc.errors() if isinstance(exc, ValidationError) else exc
    return "; ".join(f"{_path_of(e['loc'], prefix) or whole}: {_message(e)}" for e in errors)


def too_large(field: str, size: int, limit: int, unit: str = "characters") -> InputTooLarge:
    """The one wording of an input over a limit, whether the limit is the wire format's ceiling
    or the deployment's (smaller) setting: every door says it the same way."""
    return InputTooLarge(f"{field} is {size} {unit}; the limit is {limit}", field=field)


# pydantic's error types for a string or a list over its max_length.
_TOO_LONG = {"string_too_long": "characters", "too_long": "items"}


def refusal(
    exc: ValidationError | Sequence[Mapping[str, Any]], whole: str = "value", prefix: str | None = None
) -> InvalidInput:
    """A validation failure as the error every door raises for it: InputTooLarge (413) for a value
    over a length ceiling, InvalidInput (400) naming the first bad field otherwise. ``whole``
    names the value when the problem is the value itself; ``prefix`` is where it sits in a larger
    request (a door that validates one part of it)."""
    errors = exc.errors() if isinstance(exc, ValidationError) else exc
    first = errors[0]
    field = _path_of(first["loc"], prefix) or None
    unit = _TOO_LONG.get(str(first.get("type")))
    if unit is not None and field:
        value = first.get("input")
        size = len(value) if isinstance(value, str | list | tuple | dict) else 0
        return too_large(field, size, int((first.get("ctx") or {}).get("max_length", 0)), unit)
    return InvalidInput(describe_errors(errors, whole, prefix), field=field)


def no_nul(value: str) -> str:
    """PostgreSQL text cannot hold U+0000: refuse it here, with a clear message, not deep in the store."""
    if "\x00" in value:
        raise ValueError("contains a NUL character (U+0000), which text cannot hold")
    return value


def normalize_content(text: str) -> str:
    """What we store: the visible form (:func:`~rushmem_contract.inputs.visible_text`: NFKC,
    nothing invisible), one space between words, no surrounding whitespace. Every detector
    (personal data, instructions, block markers) reads this form, so what is stored is what was
    checked and what a reader sees."""
    return " ".join(visible_text(text).split())


def stored_content(value: str) -> str:
    """Content as it will be stored. Python's split() treats more characters as whitespace
    (U+001C..U+001F, U+0085) than pydantic's strip does, so emptiness is checked here, after
    normalising, not left to the database's check constraint. Content that shows nothing
    (zero-width, format or combining characters only) is refused too: it could be neither
    reviewed nor recalled by any query."""
    if not value.split():
        raise ValueError("is empty once whitespace is removed")
    value = normalize_content(value)
    if not value or not has_visible(value):
        raise ValueError("has no visible character (only invisible, format or combining characters)")
    return value


def fact_key(text: str) -> str:
    """What makes two statements the same fact: case, spacing, Unicode form and trailing
    punctuation don't matter. Deduplication everywhere uses this key (or its hash)."""
    key = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(key.split()).rstrip(" .!;。")


def content_hash(text: str) -> bytes:
    """The stored identity of a fact (the unique key with user and project): sha256 of its :func:`fact_key`."""
    return hashlib.sha256(fact_key(text).encode("utf-8")).digest()


def plain_id(value: str) -> str:
    """Ids are printable: control and format characters (which can make two ids look alike, or
    one look empty) are refused, and lone surrogates (no text: no store or encoder can hold one)."""
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in value):
        raise ValueError("contains control, invisible or surrogate characters")
    return value


def metadata_chars(value: dict[str, Any]) -> int:
    """The size the limits count: characters of the value as JSON."""
    return len(json.dumps(value, ensure_ascii=False))


# The metadata key holding what redaction removed ({"email": 1}): the service's own record, written
# by rushmem.ingest.redaction. A client's value under it is dropped on every write (POST,
# PATCH, import, the queue), so a memory never claims a redaction the service did not make.
REDACTED_KEY = "pii_redacted"


def _metadata(value: dict[str, Any]) -> dict[str, Any]:
    # Walked first (iteratively): depth, then what jsonb cannot hold (NaN, NUL, lone surrogates,
    # non-JSON types), each named by its path; json.dumps below is then safe from recursion.
    try:
        shape = inspect_json(value, max_depth=MAX_METADATA_DEPTH)
    except JsonValueError as exc:
        raise ValueError(str(exc)) from None
    if shape.keys > MAX_METADATA_KEYS:
        raise ValueError(f"has {shape.keys} keys; the limit is {MAX_METADATA_KEYS}")
    # String values and keys in the visible form, as content is (the detectors read them too).
    try:
        value = visible_strings(as_stored(value))
    except JsonValueError as exc:
        raise ValueError(str(exc)) from None
    chars = metadata_chars(value)
    if chars > MAX_METADATA_CHARS:
        raise ValueError(f"is {chars} characters as JSON; the limit is {MAX_METADATA_CHARS}")
    return value


UserId = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ID_CHARS), AfterValidator(plain_id)
]
ProjectId = UserId  # the same rules
# Where a memory came from ("api", "cli", a conversation id, an import's label): shown with the
# memory and its history, so printable like an id (no control, invisible or surrogate characters).
Source = Annotated[str, StringConstraints(max_length=MAX_ID_CHARS), AfterValidator(no_nul), AfterValidator(plain_id)]


def at_most(limit: int) -> Callable[[str], str]:
    """A length check for the visible form: NFKC can lengthen a text (U+FDFA is 18 characters), so
    a ceiling checked only on what the caller sent would let a longer text through, and fail later
    where nothing names the field (a second validation, the database)."""

    def check(value: str) -> str:
        if len(value) > limit:
            raise ValueError(f"is {len(value)} characters once in its visible form (NFKC); the limit is {limit}")
        return value

    return check


def text_checks(limit: int, form: Callable[[str], str] = stored_content) -> tuple[Any, ...]:
    """A text's checks, as ``Annotated[str, *text_checks(limit)]``: stripped and not empty, no NUL,
    in its visible ``form``, at most ``limit`` characters as sent and in that form."""
    return (
        StringConstraints(strip_whitespace=True, min_length=1, max_length=limit),
        AfterValidator(no_nul),
        AfterValidator(form),
        AfterValidator(at_most(limit)),
    )


Content = Annotated[str, *text_checks(MAX_CONTENT_CHARS)]
Metadata = Annotated[dict[str, Any], AfterValidator(_metadata)]


def own_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Metadata without the service's redaction record (never the caller's to set)."""
    return {k: v for k, v in value.items() if k != REDACTED_KEY} if REDACTED_KEY in value else value


# Metadata as a writer gives it: what only the service writes is dropped.
WrittenMetadata = Annotated[dict[str, Any], AfterValidator(_metadata), AfterValidator(own_metadata)]


def _readable_metadata(value: Any) -> Any:
    """Stored metadata as answered: rows written before the depth limit are cut at the ceiling
    rather than failing their user's every read."""
    return cut_deep(value, MAX_METADATA_DEPTH) if value else value


StoredMetadata = Annotated[dict[str, Any], BeforeValidator(_readable_metadata)]


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    """In UTC: naive timestamps are taken as UTC, so comparisons never mix the two kinds, and
    exotic offsets (Python allows up to +-24 h, PostgreSQL +-16 h) are converted."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    try:
        return value.astimezone(dt.UTC)
    except OverflowError as exc:  # e.g. 9999-12-31T23:00-05:00 is past datetime.max in UTC
        raise ValueError("timestamp out of range") from exc


AwareDatetime = Annotated[dt.datetime, AfterValidator(_aware)]


WRITE_ID_DESCRIPTION = (
    "The write that created or last touched this (a uuid every write returns: POST /memories, an import, "
    "an ingested conversation, a PATCH, a consolidation run); its history events carry the write that caused each."
)
# The one definition of a write's id on the wire, reused by every model that carries it.
WriteId = Annotated[uuid.UUID | None, Field(description=WRITE_ID_DESCRIPTION)]


class WireModel(BaseModel):
    """The base of the models: validators built on first use, not when the module is imported (a
    Lambda cold start imports them all, then uses a few; with SnapStart the warm-up builds them).
    Unknown fields are ignored (what clients and the queue send may carry more), except in a
    :class:`ClosedModel`."""

    model_config = ConfigDict(defer_build=True)


class ClosedModel(WireModel):
    """A request (or a part of one) that refuses unknown fields, naming them: a typo must not pass."""

    model_config = ConfigDict(extra="forbid")


# Where a read runs when a reader endpoint is configured: "eventual" (the reader; it may miss a
# write made moments ago) or "strong" (the writer: sees every committed write).
Consistency = Literal["eventual", "strong"]


class NewMemory(WireModel):
    """A fact to store, as given by a client, the importer or the extractor."""

    content: Content
    category: Category = "fact"
    is_evergreen: bool = False
    project_id: ProjectId | None = None
    metadata: WrittenMetadata = Field(default_factory=dict)
    created_at: AwareDatetime | None = None
    expires_at: AwareDatetime | None = None
    valid_from: AwareDatetime | None = Field(
        default=None,
        description="When the fact became true (ISO 8601); default: when it was stated (created_at, else now). "
        "Recall, list and export `as_of` read it.",
    )
    supersedes: list[uuid.UUID] = Field(
        default_factory=list,
        max_length=MAX_SUPERSEDES,
        description="Ids of the user's memories this fact replaces (a correction): they leave current recall and "
        "stay in history, valid until this fact's valid_from.",
    )
    depends_on: list[uuid.UUID] = Field(
        default_factory=list,
        max_length=MAX_DEPENDS_ON,
        description="Ids of the user's current memories this fact follows from (a gym near home follows from where "
        "the user lives): when one of them is superseded or deleted, this fact is marked stale and recall leaves it "
        "out until it is stated again.",
    )

    _not_a_message = model_validator(mode="before")(shapes.not_a_message)


# Why a memory is stale: a memory it depends on was superseded (a new value) or deleted.
StaleReason = Literal["superseded", "deleted"]


class ImportLine(NewMemory):
    """One line of `rushmem import` (and of an export): a memory plus its owner.

    An export also carries what makes the import an exact copy, which the import keeps: the id
    (never taken over when another user's memory has it: that line is refused), ``updated_at``
    (time decay), the source, and whether and by what it was superseded. ``history`` (export
    with history) is the record of the memory's changes; the import does not replay it (the
    imported memory's history starts with its 'created' event).
    """

    user_id: UserId
    id: uuid.UUID | None = None
    updated_at: AwareDatetime | None = None
    source: Source | None = None
    superseded_at: AwareDatetime | None = None
    superseded_by: uuid.UUID | None = None
    write_id: WriteId = None
    valid_until: AwareDatetime | None = None
    stale_at: AwareDatetime | None = None
    stale_because: uuid.UUID | None = None
    stale_reason: StaleReason | None = None
    history: list[MemoryEvent] | None = None
    history_cursor: str | None = Field(
        default=None,
        description="Set on an export line whose history stops short (a history over "
        f"{EXPORT_HISTORY_BYTES // 1024} KiB): the rest is GET /memories/{{id}}/history with this cursor. "
        "Import ignores it, as it does the history.",
    )

    @field_validator("supersedes")
    @classmethod
    def _no_supersedes(cls, value: list[uuid.UUID]) -> list[uuid.UUID]:
        # An import restores memories as they were (superseded_by); replacing is a write's (POST /memories).
        if value:
            raise ValueError("an import line cannot supersede; restore superseded_by, or use POST /memories")
        return value


INJECTION_DESCRIPTION = (
    "Why this memory looks like it carries instructions for the model (empty: nothing found): "
    "instruction_override, prompt_request, role_marker, block_marker, template_token. The memory is kept; "
    "the prompt block replaces those parts."
)


class MemoryRecord(WireModel):
    """A stored memory as returned by list/recall."""

    id: uuid.UUID
    user_id: str
    project_id: str | None
    content: str
    category: str
    source: str | None = None
    is_evergreen: bool
    created_at: dt.datetime
    updated_at: dt.datetime
    expires_at: dt.datetime | None = None
    superseded_by: uuid.UUID | None = None
    superseded_at: dt.datetime | None = None
    metadata: StoredMetadata = Field(default_factory=dict)
    injection: list[str] = Field(default_factory=list, description=INJECTION_DESCRIPTION)
    write_id: WriteId = None
    valid_from: dt.datetime | None = Field(default=None, description="When the fact became true.")
    valid_until: dt.datetime | None = Field(
        default=None, description="When it stopped being true (superseded by superseded_by); null: still true."
    )
    depends_on: list[uuid.UUID] = Field(
        default_factory=list, description="The memories this fact follows from (see stale_at)."
    )
    stale_at: dt.datetime | None = Field(
        default=None,
        description="When a memory it depends on (stale_because) was superseded or deleted (stale_reason): it may "
        "no longer hold, and recall leaves it out. null: current. Stating the fact again clears it.",
    )
    stale_because: uuid.UUID | None = Field(default=None, description="The memory whose change made it stale.")
    stale_reason: StaleReason | None = Field(default=None, description="What happened to stale_because.")


def _not_null(value: Any, info: ValidationInfo) -> Any:
    if value is None:
        raise ValueError(f"{info.field_name} cannot be cleared (null); leave it out to keep it")
    return value


class MemoryChanges(ClosedModel):
    """What to change in one memory (PATCH /memories/{id}): a field left out stays as it is; null
    clears what may be cleared (``expires_at``: never expires; ``metadata``: empty). ``metadata``
    replaces the whole object. A new ``content`` is re-embedded and makes the memory fresh again
    (``updated_at``); the other fields leave ``updated_at`` alone, since it drives time decay. A new
    ``content`` never rewrites the past unless ``typo_fix`` says it only fixes the wording."""

    content: Content | None = None
    category: Category | None = None
    metadata: WrittenMetadata | None = None
    expires_at: AwareDatetime | None = None
    is_evergreen: bool | None = None
    typo_fix: bool = Field(
        default=False,
        description="true: the new content only fixes a typo (changed for the past too), not a new version.",
    )

    # The fields a given null clears; for the others a given null is refused (the validator runs
    # only for fields that were given).
    CLEARABLE: ClassVar[tuple[str, ...]] = ("metadata", "expires_at")
    _no_null = field_validator("content", "category", "is_evergreen", mode="before")(_not_null)

    def changed(self) -> dict[str, Any]:
        """The fields given, with their new values (None: clear); metadata null is the empty object.
        How a new content is written (``typo_fix``) is no field of the memory."""
        mine = MemoryChanges.model_fields
        values = {name: getattr(self, name) for name in self.model_fields_set if name in mine and name != "typo_fix"}
        if "metadata" in values and values["metadata"] is None:
            values["metadata"] = {}
        return values


class MemoryFilters(ClosedModel):
    """Which of the user's memories a recall or a listing considers (all given conditions hold):
    any of ``categories``; ``metadata`` containing the given object (JSONB ``@>``: nested
    objects and arrays match by containment); created in [``created_after``, ``created_before``)."""

    categories: list[Category] | None = Field(
        default=None,
        min_length=1,
        max_length=len(CATEGORIES),
        description="Only memories of these categories.",
    )
    metadata: Metadata | None = Field(
        default=None, description='Only memories whose metadata contains this JSON object, e.g. {"team": "web"}.'
    )
    created_after: AwareDatetime | None = Field(
        default=None, description="Only memories created at or after this ISO 8601 date-time."
    )
    created_before: AwareDatetime | None = Field(
        default=None, description="Only memories created before this ISO 8601 date-time."
    )

    @field_validator("created_before")
    @classmethod
    def _a_window(cls, value: dt.datetime | None, info: ValidationInfo) -> dt.datetime | None:
        after = info.data.get("created_after")
        if value is not None and after is not None and value <= after:
            raise ValueError("must be later than created_after")
        return value


class MemoryPage(WireModel):
    """A page of memories, newest first; pass ``next_cursor`` to get the next page (None: the last)."""

    memories: list[MemoryRecord]
    next_cursor: str | None


class RecalledMemory(WireModel):
    """The public shape of one recalled memory (CLI and API alike)."""

    id: uuid.UUID
    content: str
    category: str
    score: float
    created_at: dt.datetime
    is_evergreen: bool
    project_id: str | None
    metadata: StoredMetadata = Field(default_factory=dict)
    injection: list[str] = Field(default_factory=list, description=INJECTION_DESCRIPTION)


# Why a candidate of an explained recall is in the answer or not.
CandidateOutcome = Literal[
    "kept", "below_min_score", "below_relative_score", "over_token_budget", "mmr", "past_limit", "leg_off", "stale"
]
# Why a memory the caller named (explain_ids) was, or was not, a candidate.
NamedOutcome = Literal[
    "candidate",
    "not_found",
    "another_scope",
    "superseded",
    "expired",
    "not_yet_valid",
    "filtered_out",
    "pending_review",
    "not_near_enough",
]
MAX_EXPLAIN_IDS = 50


class RecallSignals(WireModel):
    """What ranking saw of one candidate, step by step (see docs/how-it-works.md, recall)."""

    vector_similarity: float = Field(description="Cosine similarity to the query (1 - distance).")
    vector_position: int | None = Field(description="Its place in the vector leg, 1 = nearest; null: not in it.")
    text_rank: float = Field(description="Full-text rank (ts_rank_cd) over the best candidate's, 0..1.")
    text_position: int | None = Field(description="Its place in the full-text leg; null: not in it.")
    date_window: bool = Field(description="Stated inside a date window the query names (boosted, no decay).")
    hop_bonus: float = Field(description="Added for being stated together with one of the most relevant.")
    reranker_score: float | None = Field(description="The reranker's own score; null: not reranked.")
    relevance: float = Field(description="Fused (and reranked) relevance, before decay and the date boost.")
    decay: float = Field(description="The time-decay factor applied (1: none: evergreen, or in a date window).")
    mmr_penalty: float | None = Field(
        description="What MMR took off for likeness to a memory chosen before it; null without MMR."
    )


class ExplainedCandidate(WireModel):
    """One candidate of an explained recall: its signals, its final score and its outcome."""

    id: uuid.UUID
    content: str
    category: str
    project_id: str | None
    created_at: dt.datetime
    signals: RecallSignals
    score: float = Field(description="The final score (the one a kept memory is returned with).")
    position: int | None = Field(description="Its place in the answer (1 = first); null: dropped.")
    outcome: CandidateOutcome
    why: str


class ExplainedName(WireModel):
    """A memory the caller named (explain_ids): whether it was a candidate and, if not, why."""

    id: uuid.UUID
    outcome: NamedOutcome
    why: str
    vector_similarity: float | None = None
    vector_position: int | None = Field(
        default=None, description="Its place by similarity among the memories in scope (the leg takes the first k)."
    )
    text_match: bool | None = None


class RecallExplanation(WireModel):
    """Why an explained recall (``explain``) answered what it did."""

    now: dt.datetime = Field(description="The instant the recall was evaluated at (decay and date words).")
    as_of: dt.datetime | None = None
    limit: int
    candidates_per_leg: int
    min_score: float
    min_relative_score: float = 0.0
    max_tokens: int | None = Field(default=None, description="The request's token budget for the block; null: none.")
    weights: dict[str, float] = Field(description="The plan's weights: vector, text, date_boost, hop, rerank, mmr.")
    date_windows: list[tuple[dt.datetime, dt.datetime]] = Field(default_factory=list)
    reranked: bool = False
    candidates: list[ExplainedCandidate]
    named: list[ExplainedName] = Field(default_factory=list)


class RecallResult(WireModel):
    memories: list[RecalledMemory]
    prompt_block: str
    block_tokens: int = Field(
        default=0, description="The prompt block's size in tokens, counted as docs/api.md says (0: no block)."
    )
    query: str
    explanation: RecallExplanation | None = Field(
        default=None, description="With explain: every candidate's signals and outcome, and the named memories'."
    )
    unavailable: Literal["database_resuming"] | None = Field(
        default=None,
        description="Set when no memory could be read, so memories and prompt_block are empty and the agent "
        "should proceed without them: database_resuming, the database is waking from auto-pause (about 15 s).",
    )


class RecallQuery(WireModel):
    """One query of a batch recall (a line of `rushmem recall --queries`); other fields
    (a benchmark's evidence, category, ...) are ignored."""

    user_id: UserId
    query: str
    project_id: ProjectId | None = None
    now: AwareDatetime | None = None
    limit: int | None = None
    max_tokens: int | None = None
    filters: MemoryFilters | None = None
    as_of: AwareDatetime | None = None


class FactOutcome(WireModel):
    """What a write did with one fact: stored as a new memory (``created``), or folded into the
    existing memory ``id`` that states the same fact (``refreshed``); and the memories it superseded."""

    id: uuid.UUID = Field(description="The memory holding the fact (refreshed: the existing one it went into).")
    action: Literal["created", "refreshed"]
    content: str = Field(
        description="The fact as this write stored it: its visible form, personal data redacted (refreshed: as "
        "given; the existing memory keeps its own wording)."
    )
    refreshed_as: Literal["exact_duplicate", "near_duplicate", "restated"] | None = Field(
        default=None,
        description="Why it was refreshed: the same text, the same fact worded otherwise, or an extractor's "
        "'restates'.",
    )
    superseded: list[uuid.UUID] = Field(
        default_factory=list, description="Memories this fact replaced: closed (valid_until) and kept in history."
    )
    superseded_by: uuid.UUID | None = Field(
        default=None,
        description="Set when the fact was true before a stored version of it (valid_from): it is kept as history, "
        "superseded at once by that memory.",
    )


class StoredIds(WireModel):
    """What a write returns: the ids in input order, and which of them were new rows; per fact
    (``facts``, input order) what happened to it.

    With RUSHMEM_PII, ``pii_dropped`` lists the input positions not stored because they held
    personal data in a category set to drop; ``ids`` then holds the stored ones, still in order.
    """

    ids: list[uuid.UUID]
    created: int
    refreshed: int
    pii_redacted: int = 0
    pii_dropped: list[int] = Field(default_factory=list)
    write_id: WriteId = None
    superseded: int = 0
    facts: list[FactOutcome] = Field(default_factory=list)
    pending: list[uuid.UUID] = Field(
        default_factory=list,
        description="With RUSHMEM_REVIEW_WRITES, the facts held for review (never recalled until approved): "
        "their pending ids, in input order; ids and facts then hold the stored ones.",
    )


ReviewReason = Annotated[
    str,
    Field(
        description="injection:<mark>, pii:<type> or untrusted_source; for a consolidation proposal "
        "consolidation:same_fact or consolidation:newer_value"
    ),
]


class ProposedMemory(WireModel):
    """One memory a consolidation proposal names, with its current text (hidden characters shown
    as ``<U+200B>``)."""

    id: uuid.UUID
    content: str


class ProposedChange(WireModel):
    """What a consolidation proposal would change: ``memory`` ends, ``kept`` stays current."""

    memory: ProposedMemory = Field(description="The memory the change ends (merged away, or retired).")
    kept: ProposedMemory = Field(description="The memory that stays current (merged into, or superseding).")
    still_applies: bool = Field(
        description="Both memories are current and unchanged since the proposal; false: an approval is "
        "refused (409) and withdraws it."
    )


class PendingMemory(WireModel):
    """A write waiting for review: never recalled until a person approves it. With review on,
    consolidation's merges and retirements wait here too (``kind`` merge or retire, ``proposal``
    the before and after; ``content`` says what approving does), decided the same way."""

    id: uuid.UUID
    user_id: str
    project_id: str | None
    content: str = Field(
        description='The held fact, or for a proposal what approving does: Merge "…" into "…", or '
        'Retire "…", superseded by "…". Hidden characters (zero-width, bidi, tags…) shown as <U+200B>.'
    )
    category: str
    source: str | None = None
    reasons: list[ReviewReason]
    created_at: dt.datetime
    write_id: WriteId = None
    kind: Literal["write", "merge", "retire"] = Field(
        default="write",
        description="write: a held write (approved, it is stored); merge: consolidation proposes merging "
        "`proposal.memory`, the same fact, into `proposal.kept`; retire: it proposes retiring "
        "`proposal.memory`, superseded by the newer `proposal.kept`.",
    )
    proposal: ProposedChange | None = Field(default=None, description="For merge and retire: the before and after.")


class PendingPage(WireModel):
    """The writes waiting for review (and, with review on, consolidation's proposals), oldest first."""

    memories: list[PendingMemory]


ReviewDecision = Literal["approve", "reject"]


class ReviewOutcome(WireModel):
    """What a review decision did: approved, the memory the write became (a new one, or the stored
    memory that already states the fact); rejected, nothing is stored and its text leaves the history.
    For a consolidation proposal: approved, ``memory_id`` is the memory kept; rejected, nothing changed."""

    id: uuid.UUID
    decision: ReviewDecision
    memory_id: uuid.UUID | None = None
    write_id: WriteId = None


class UserCount(WireModel):
    """One user and how many memories they have (``GET /users``: the page's user picker)."""

    user_id: str
    memories: int = Field(description="Current memories (neither superseded nor expired).")
    stored: int = Field(description="Every stored memory, superseded and expired ones too.")
    pending: int = Field(description="Writes and consolidation proposals waiting for review.")


class UserList(WireModel):
    users: list[UserCount]


class MemoryEvent(WireModel):
    """One recorded change of a memory (its history). ``content`` is None once the memory was
    deleted: its history keeps when, by whom and by which write, not what."""

    memory_id: uuid.UUID
    event: Literal[
        "created",
        "refreshed",
        "superseded",
        "merged",
        "revived",
        "expiry_changed",
        "updated",
        "deleted",
        "expired",
        "purged",
        "pending",
        "approved",
        "rejected",
    ]
    at: dt.datetime
    source: str | None = None
    content: str | None = None
    related_id: uuid.UUID | None = None
    project_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
    write_id: WriteId = None


def _text_of(value: Any) -> Any:
    """Content as OpenAI-style parts ([{"type": "text", "text": ...}, ...]) becomes its text."""
    if isinstance(value, list):
        texts = [p.get("text") for p in value if isinstance(p, dict) and p.get("type", "text") == "text"]
        if all(isinstance(t, str) for t in texts):
            return "\n".join(t for t in texts if t)
    return value


class ChatMessage(WireModel):
    """One chat turn, as the chat application sends it."""

    role: Literal["user", "assistant", "system", "developer", "tool", "function"]
    content: Annotated[
        str,
        StringConstraints(max_length=MAX_MESSAGE_CHARS),
        BeforeValidator(_text_of),
        AfterValidator(no_nul),
        AfterValidator(visible_text),
        AfterValidator(at_most(MAX_MESSAGE_CHARS)),
    ]
    created_at: AwareDatetime | None = None


def _blank_to_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


class ConversationEnded(WireModel):
    """The write-path message (SQS body) the chat application sends when a conversation ends.

    Either ``messages`` (extracted by the configured LLM provider) or ``memories`` (facts the
    client extracted itself, stored as given), or both. Unknown fields are ignored. The
    ceilings here are the wire format's; the service also applies the (smaller) configured
    limits (max_messages_per_conversation, max_message_chars, max_memories_per_request,
    max_memory_chars), so an oversized message is invalid either way.
    """

    user_id: UserId
    project_id: Annotated[ProjectId | None, BeforeValidator(_blank_to_none)] = None
    conversation_id: Annotated[
        Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_ID_CHARS), AfterValidator(plain_id)]
        | None,
        BeforeValidator(_blank_to_none),
    ] = None
    ended_at: AwareDatetime | None = None
    messages: list[ChatMessage] = Field(default_factory=list, max_length=MAX_MESSAGES)
    memories: list[NewMemory] = Field(default_factory=list, max_length=MAX_MESSAGES)

    @model_validator(mode="after")
    def _something_to_remember(self) -> ConversationEnded:
        if not self.messages and not self.memories:
            raise ValueError("the message needs 'messages' or 'memories' (both are empty or missing)")
        return self


class IngestOutcome(WireModel):
    """What one "conversation ended" message did to the store."""

    user_id: str
    conversation_id: str | None
    # stored: written (possibly nothing new); duplicate: this exact message was ingested
    # before (a redelivery), nothing changed; nothing_to_store: no memory in it.
    status: Literal["stored", "duplicate", "nothing_to_store"]
    provided: int = 0  # memories the client sent
    extracted: int = 0  # memories kept from extraction
    dropped: int = 0  # extracted items dropped (invalid, too long, over the cap)
    created: int = 0
    refreshed: int = 0  # folded into an existing memory (exact or near duplicate, or marked as restating it)
    superseded: int = 0  # existing memories marked as replaced by this message's memories
    updates_ignored: int = 0  # restates/replaces references refused by the guards (the facts were kept as new)
    ids: list[uuid.UUID] = Field(default_factory=list)
    facts: list[FactOutcome] = Field(default_factory=list)  # per stored memory (ids' order), what happened
    pii_redacted: int = 0  # memories stored with personal data replaced by placeholders (RUSHMEM_PII)
    pii_dropped: int = 0  # memories not stored because they held personal data in a category set to drop
    write_id: WriteId = None
    # With RUSHMEM_REVIEW_WRITES: the facts held for review (their pending ids), not stored yet.
    pending: list[uuid.UUID] = Field(default_factory=list)


class ExportPage(WireModel):
    """A page of a user's export (GET /memories/export): import lines, newest first; pass
    ``next_cursor`` for the next page (None: the last)."""

    lines: list[ImportLine]
    next_cursor: str | None


def export_line(
    memory: MemoryRecord, history: list[MemoryEvent] | None = None, history_cursor: str | None = None
) -> ImportLine:
    """A stored memory as the import line that restores it. Not validated again: a row stored
    before a rule existed (content with nothing visible, say) is exported as it is, never a
    failed export; importing it is what refuses it, that line alone."""
    # Every field the two share (all but recall's injection marks), as stored.
    shared = {name: getattr(memory, name) for name in ImportLine.model_fields if name in MemoryRecord.model_fields}
    return ImportLine.model_construct(**shared, supersedes=[], history=history, history_cursor=history_cursor)


ImportLine.model_rebuild()  # its history refers to MemoryEvent, defined after it
