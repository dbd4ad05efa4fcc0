"""The memory API over HTTP, synchronously (httpx.Client): :class:`MemoryClient`.

Every operation is built once in :mod:`.calls` (shared with :class:`rushmem_client.AsyncMemoryClient`);
this module only sends it, with the one retry policy.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from tenacity import Retrying

from rushmem_client import calls
from rushmem_client.calls import Auth, Call
from rushmem_contract.errors import ConfigurationError, NotFound
from rushmem_contract.instructions import ExtractionInstructions, StoredInstructions
from rushmem_contract.models import (
    MAX_PAGE,
    ChatMessage,
    Consistency,
    ImportLine,
    IngestOutcome,
    MemoryChanges,
    MemoryEvent,
    MemoryFilters,
    MemoryRecord,
    NewMemory,
    PendingMemory,
    RecallResult,
    ReviewDecision,
    ReviewOutcome,
    StoredIds,
    UserCount,
)
from rushmem_contract.retry import Retryable
from rushmem_contract.schemas import ErasureReceipt, MemoryHistory, UsageReport

T = TypeVar("T")
Filters = MemoryFilters | Mapping[str, Any] | None


@dataclasses.dataclass
class MemoryList:
    """One page of memories, newest first: iterate it (or read ``memories``); ``next_cursor``
    fetches the next page (None: the last). ``iter_memories`` walks every page."""

    memories: list[MemoryRecord]
    next_cursor: str | None

    def __iter__(self) -> Iterator[MemoryRecord]:
        return iter(self.memories)

    def __len__(self) -> int:
        return len(self.memories)


def check_url(api_url: str) -> str:
    split = urlsplit(api_url)
    if split.scheme not in ("http", "https") or not split.netloc:
        raise ConfigurationError(f"api_url must be an http(s) URL, not {api_url!r}")
    return api_url.rstrip("/")


class MemoryClient:
    """The rushmem HTTP API (RecallFunction behind API Gateway, or ``rushmem serve``).

    ``auth``: ``"iam"`` signs every request with SigV4 (service ``execute-api``) using the
    default AWS credential chain (needs boto3: ``rushmem-client[aws]``); ``"jwt"`` sends
    ``Authorization: Bearer <token>`` (``token`` may be a callable returning a fresh one);
    ``"none"`` sends neither. Left out, it follows the URL: a token means JWT, an execute-api
    host IAM, anything else (``rushmem serve`` on localhost) none. Every operation is
    idempotent, so connection failures, timeouts, 429 and 502-504 are retried ``retries`` times
    with backoff.
    """

    def __init__(
        self,
        api_url: str,
        *,
        auth: Auth | None = None,
        token: str | Callable[[], str] | None = None,
        region: str | None = None,
        timeout: float = 10.0,
        retries: int = 2,
        http: httpx.Client | None = None,
    ) -> None:
        self.api_url = check_url(api_url)
        self.auth = calls.infer_auth(api_url, auth, token)
        self._signer = calls.Signer(api_url, self.auth, token, region)
        self._region = self._signer.region
        self._retries = max(0, retries)
        self._http = http or httpx.Client(timeout=timeout)
        self._owns_http = http is None

    # ---- the API ---------------------------------------------------------------------

    def recall(  # noqa: PLR0913 -- the public client: RecallRequest's documented fields
        self,
        query: str | None = None,
        *,
        user_id: str | None = None,
        messages: Sequence[Mapping[str, Any] | ChatMessage] | None = None,
        project_id: str | None = None,
        limit: int | None = None,
        now: dt.datetime | None = None,
        filters: Filters = None,
        consistency: Consistency | None = None,
        include_inactive: bool = False,
        as_of: dt.datetime | None = None,
        explain: bool = False,
        explain_ids: Sequence[uuid.UUID | str] | None = None,
    ) -> RecallResult:
        """The memories relevant to ``query`` (or to the latest user message of ``messages``),
        among those matching ``filters``, and the ``[RUSH_MEMORY]`` block for the system prompt.
        ``consistency="strong"`` (here and on the other reads) reads the writer where the stack has
        a reader endpoint: for a read that must see a write made moments ago. ``include_inactive``:
        superseded and expired memories too (debugging). ``explain``: also why
        (``result.explanation``: every candidate's signals and outcome); ``explain_ids``: memories to
        account for (why each was not a candidate)."""
        return self._run(
            calls.recall(
                query,
                user_id=user_id,
                messages=messages,
                project_id=project_id,
                limit=limit,
                now=now,
                filters=filters,
                consistency=consistency,
                include_inactive=include_inactive,
                as_of=as_of,
                explain=explain,
                explain_ids=explain_ids,
            )
        )

    def add(
        self,
        memories: Sequence[str | Mapping[str, Any] | NewMemory],
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        supersedes: Sequence[uuid.UUID | str] = (),
        valid_from: dt.datetime | None = None,
    ) -> StoredIds:
        """Store facts now (no LLM); ids come back in input order, and per fact what happened
        (created, refreshed into an existing memory, memories superseded). A plain string is a
        ``fact``; ``supersedes`` and ``valid_from`` apply to the plain strings."""
        return self._run(
            calls.add(memories, user_id=user_id, project_id=project_id, supersedes=supersedes, valid_from=valid_from)
        )

    def add_messages(
        self,
        messages: Sequence[Mapping[str, Any] | ChatMessage],
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        conversation_id: str | None = None,
        memories: Sequence[str | Mapping[str, Any] | NewMemory] = (),
        ended_at: dt.datetime | None = None,
    ) -> IngestOutcome:
        """Hand a finished conversation to the write path now (POST /conversations): the server
        extracts and stores the facts worth keeping and says what it did. The same message twice
        is a ``duplicate`` that changes nothing, as on the SQS queue."""
        return self._run(
            calls.add_messages(
                messages,
                user_id=user_id,
                project_id=project_id,
                conversation_id=conversation_id,
                memories=memories,
                ended_at=ended_at,
            )
        )

    def list_memories(
        self,
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        include_inactive: bool = False,
        filters: Filters = None,
        consistency: Consistency | None = None,
        as_of: dt.datetime | None = None,
    ) -> MemoryList:
        """One page of the user's memories, newest first; iterate it. ``next_cursor`` fetches the next."""
        call = calls.list_memories(
            user_id=user_id,
            project_id=project_id,
            limit=limit,
            cursor=cursor,
            include_inactive=include_inactive,
            filters=filters,
            consistency=consistency,
            as_of=as_of,
        )
        page = self._run(call)
        return MemoryList(page.memories, page.next_cursor)

    def iter_memories(
        self, *, user_id: str | None = None, project_id: str | None = None, filters: Filters = None
    ) -> Iterator[MemoryRecord]:
        """Every memory of the user (matching ``filters``), page after page."""

        def fetch(cursor: str | None) -> tuple[list[MemoryRecord], str | None]:
            page = self.list_memories(
                user_id=user_id, project_id=project_id, limit=MAX_PAGE, cursor=cursor, filters=filters
            )
            return page.memories, page.next_cursor

        return calls.pages(fetch)

    def get_memory(
        self, memory_id: uuid.UUID | str, *, user_id: str | None = None, consistency: Consistency | None = None
    ) -> MemoryRecord:
        """One memory of the user (live or not); NotFound when the user has none with that id."""
        return self._run(calls.get_memory(memory_id, user_id=user_id, consistency=consistency))

    def update_memory(
        self,
        memory_id: uuid.UUID | str,
        changes: MemoryChanges | Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        **fields: Any,
    ) -> MemoryRecord:
        """Change a memory: ``content``, ``category``, ``metadata``, ``expires_at``,
        ``is_evergreen`` (as ``changes`` or keywords); None clears ``expires_at`` or ``metadata``.
        A new ``content`` is a new version (the old text stays true until now, ``as_of`` reads it)
        unless ``typo_fix=True`` says it only fixes the wording.
        Returns it as it now is; Conflict (field ``content``) when another memory states that."""
        return self._run(calls.update_memory(memory_id, changes, fields, user_id=user_id))

    def forget_memory(self, memory_id: uuid.UUID | str, *, user_id: str | None = None) -> bool:
        """Delete one memory; False when the user has no memory with that id."""
        return self._run(calls.forget_memory(memory_id, user_id=user_id))

    def forget_user(self, user_id: str) -> ErasureReceipt:
        """Delete everything stored about the user (``user_id`` is required, also with a JWT); the
        erasure receipt (counts, time, requester; the user only as a keyed hash), kept by the service."""
        return self._run(calls.forget_user(user_id))

    def erasure(self, erasure_id: uuid.UUID | str) -> ErasureReceipt:
        """A stored erasure receipt (NotFound if none; with a JWT, only the caller's own)."""
        return self._run(calls.erasure(erasure_id))

    def usage(
        self, *, user_id: str | None = None, start: dt.date | None = None, end: dt.date | None = None
    ) -> UsageReport:
        """The user's usage per UTC day (recalls, conversations, writes, provider calls and tokens)
        from ``start`` to ``end`` (both included; default the last 30 days) and its estimated cost."""
        return self._run(calls.usage(user_id=user_id, start=start, end=end))

    def history(self, memory_id: uuid.UUID | str, *, user_id: str | None = None) -> list[MemoryEvent]:
        """Every recorded change of one of the user's memories, oldest first, page after page
        (NotFound if none)."""

        def fetch(cursor: str | None) -> tuple[list[MemoryEvent], str | None]:
            page = self.history_page(memory_id, user_id=user_id, cursor=cursor)
            return page.events, page.next_cursor

        return list(calls.pages(fetch))

    def history_page(
        self,
        memory_id: uuid.UUID | str,
        *,
        user_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> MemoryHistory:
        """One page of a memory's recorded changes, oldest first; ``next_cursor`` fetches the next."""
        return self._run(calls.history_page(memory_id, user_id=user_id, cursor=cursor, limit=limit))

    def instructions(self, *, user_id: str | None = None, project_id: str | None = None) -> StoredInstructions:
        """The extraction instructions the project's conversations are extracted with (version 0: none stored)."""
        return self._run(calls.get_instructions(user_id=user_id, project_id=project_id))

    def set_instructions(
        self,
        instructions: ExtractionInstructions | Mapping[str, Any],
        *,
        user_id: str | None = None,
        project_id: str | None = None,
    ) -> StoredInstructions:
        """Replace the project's extraction instructions (a new version; InvalidInput names a bad field)."""
        return self._run(calls.set_instructions(instructions, user_id=user_id, project_id=project_id))

    def instructions_history(
        self, *, user_id: str | None = None, project_id: str | None = None
    ) -> list[StoredInstructions]:
        """Every stored version of the project's extraction instructions, oldest first."""
        return self._run(calls.instructions_history(user_id=user_id, project_id=project_id))

    def pending(
        self, *, user_id: str | None = None, project_id: str | None = None, limit: int | None = None
    ) -> list[PendingMemory]:
        """The user's writes held for review (AGENT_MEMORY_REVIEW_WRITES), oldest first: never
        recalled until approved."""
        return self._run(calls.pending(user_id=user_id, project_id=project_id, limit=limit))

    def review(
        self, pending_id: uuid.UUID | str, decision: ReviewDecision, *, user_id: str | None = None
    ) -> ReviewOutcome:
        """Approve (written as any write, recalled from now on) or reject a write held for review."""
        return self._run(calls.review(pending_id, decision, user_id=user_id))

    def users(self, *, limit: int | None = None) -> list[UserCount]:
        """Every user with their counts of memories, by id: for an IAM caller or the local server
        (Forbidden with a JWT)."""
        return self._run(calls.users(limit=limit))

    def export_memories(
        self,
        *,
        user_id: str | None = None,
        history: bool = False,
        page_size: int | None = None,
        consistency: Consistency | None = None,
        as_of: dt.datetime | None = None,
    ) -> Iterator[ImportLine]:
        """Everything the user has, as import lines (``rushmem import`` restores them), page
        after page; with ``history``, each with its memory's recorded changes."""

        def fetch(cursor: str | None) -> tuple[list[ImportLine], str | None]:
            page = self._run(
                calls.export_page(
                    user_id=user_id,
                    history=history,
                    cursor=cursor,
                    limit=page_size,
                    consistency=consistency,
                    as_of=as_of,
                )
            )
            return page.lines, page.next_cursor

        return calls.pages(fetch)

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transport -------------------------------------------------------------------

    def _run(self, call: Call[T]) -> T:
        url, content = call.url(self.api_url), call.content()
        try:
            response: httpx.Response | NotFound = Retrying(**calls.retry_policy(self._retries))(
                self._send, call.method, url, content
            )
        except Retryable as failed:
            raise calls.given_up(failed) from failed.__cause__
        except NotFound as missing:
            response = missing
        return calls.finish(call, response)

    def _send(self, method: str, url: str, content: bytes) -> httpx.Response:
        headers = self._signer.headers(method, url, content)
        try:
            response = self._http.request(method, url, content=content or None, headers=headers)
        except httpx.TransportError as exc:
            raise calls.unreachable(self.api_url, exc) from exc
        calls.check_answer(response, self.api_url)
        return response
