"""The memory API over HTTP, asynchronously (httpx.AsyncClient): :class:`AsyncMemoryClient`,
with the same methods as :class:`rushmem_client.MemoryClient` (each built once in :mod:`.calls`)."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
from tenacity import AsyncRetrying

from rushmem_client import calls
from rushmem_client.calls import Auth, Call
from rushmem_client.http import Filters, MemoryList, check_url
from rushmem_contract.errors import NotFound
from rushmem_contract.instructions import ExtractionInstructions, StoredInstructions
from rushmem_contract.models import (
    MAX_PAGE,
    ChatMessage,
    Consistency,
    ImportLine,
    IngestOutcome,
    MemoryChanges,
    MemoryEvent,
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


class AsyncMemoryClient:
    """:class:`rushmem_client.MemoryClient` for asyncio: the same arguments, methods and
    errors, awaited (``iter_memories`` and ``export_memories`` are async iterators)."""

    def __init__(
        self,
        api_url: str,
        *,
        auth: Auth | None = None,
        token: str | Callable[[], str] | None = None,
        region: str | None = None,
        timeout: float = 10.0,
        retries: int = 2,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.api_url = check_url(api_url)
        self.auth = calls.infer_auth(api_url, auth, token)
        self._signer = calls.Signer(api_url, self.auth, token, region)
        self._retries = max(0, retries)
        self._http = http or httpx.AsyncClient(timeout=timeout)
        self._owns_http = http is None

    async def recall(  # noqa: PLR0913 -- the public client: RecallRequest's documented fields
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
        return await self._run(
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

    async def add(
        self,
        memories: Sequence[str | Mapping[str, Any] | NewMemory],
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        supersedes: Sequence[uuid.UUID | str] = (),
        valid_from: dt.datetime | None = None,
    ) -> StoredIds:
        return await self._run(
            calls.add(memories, user_id=user_id, project_id=project_id, supersedes=supersedes, valid_from=valid_from)
        )

    async def add_messages(
        self,
        messages: Sequence[Mapping[str, Any] | ChatMessage],
        *,
        user_id: str | None = None,
        project_id: str | None = None,
        conversation_id: str | None = None,
        memories: Sequence[str | Mapping[str, Any] | NewMemory] = (),
        ended_at: dt.datetime | None = None,
    ) -> IngestOutcome:
        return await self._run(
            calls.add_messages(
                messages,
                user_id=user_id,
                project_id=project_id,
                conversation_id=conversation_id,
                memories=memories,
                ended_at=ended_at,
            )
        )

    async def list_memories(
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
        page = await self._run(call)
        return MemoryList(page.memories, page.next_cursor)

    async def iter_memories(
        self, *, user_id: str | None = None, project_id: str | None = None, filters: Filters = None
    ) -> AsyncIterator[MemoryRecord]:
        cursor: str | None = None
        while True:
            page = await self.list_memories(
                user_id=user_id, project_id=project_id, limit=MAX_PAGE, cursor=cursor, filters=filters
            )
            for memory in page:
                yield memory
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def get_memory(
        self, memory_id: uuid.UUID | str, *, user_id: str | None = None, consistency: Consistency | None = None
    ) -> MemoryRecord:
        return await self._run(calls.get_memory(memory_id, user_id=user_id, consistency=consistency))

    async def update_memory(
        self,
        memory_id: uuid.UUID | str,
        changes: MemoryChanges | Mapping[str, Any] | None = None,
        *,
        user_id: str | None = None,
        **fields: Any,
    ) -> MemoryRecord:
        return await self._run(calls.update_memory(memory_id, changes, fields, user_id=user_id))

    async def forget_memory(self, memory_id: uuid.UUID | str, *, user_id: str | None = None) -> bool:
        return await self._run(calls.forget_memory(memory_id, user_id=user_id))

    async def forget_user(self, user_id: str) -> ErasureReceipt:
        return await self._run(calls.forget_user(user_id))

    async def erasure(self, erasure_id: uuid.UUID | str) -> ErasureReceipt:
        return await self._run(calls.erasure(erasure_id))

    async def usage(
        self, *, user_id: str | None = None, start: dt.date | None = None, end: dt.date | None = None
    ) -> UsageReport:
        return await self._run(calls.usage(user_id=user_id, start=start, end=end))

    async def history(self, memory_id: uuid.UUID | str, *, user_id: str | None = None) -> list[MemoryEvent]:
        events: list[MemoryEvent] = []
        cursor: str | None = None
        while True:
            page = await self.history_page(memory_id, user_id=user_id, cursor=cursor)
            events.extend(page.events)
            if page.next_cursor is None:
                return events
            cursor = page.next_cursor

    async def history_page(
        self,
        memory_id: uuid.UUID | str,
        *,
        user_id: str | None = None,
        cursor: str | None = None,
        limit: int | None = None,
    ) -> MemoryHistory:
        return await self._run(calls.history_page(memory_id, user_id=user_id, cursor=cursor, limit=limit))

    async def instructions(self, *, user_id: str | None = None, project_id: str | None = None) -> StoredInstructions:
        return await self._run(calls.get_instructions(user_id=user_id, project_id=project_id))

    async def set_instructions(
        self,
        instructions: ExtractionInstructions | Mapping[str, Any],
        *,
        user_id: str | None = None,
        project_id: str | None = None,
    ) -> StoredInstructions:
        return await self._run(calls.set_instructions(instructions, user_id=user_id, project_id=project_id))

    async def instructions_history(
        self, *, user_id: str | None = None, project_id: str | None = None
    ) -> list[StoredInstructions]:
        return await self._run(calls.instructions_history(user_id=user_id, project_id=project_id))

    async def pending(
        self, *, user_id: str | None = None, project_id: str | None = None, limit: int | None = None
    ) -> list[PendingMemory]:
        return await self._run(calls.pending(user_id=user_id, project_id=project_id, limit=limit))

    async def review(
        self, pending_id: uuid.UUID | str, decision: ReviewDecision, *, user_id: str | None = None
    ) -> ReviewOutcome:
        return await self._run(calls.review(pending_id, decision, user_id=user_id))

    async def users(self, *, limit: int | None = None) -> list[UserCount]:
        return await self._run(calls.users(limit=limit))

    async def export_memories(
        self,
        *,
        user_id: str | None = None,
        history: bool = False,
        page_size: int | None = None,
        consistency: Consistency | None = None,
        as_of: dt.datetime | None = None,
    ) -> AsyncIterator[ImportLine]:
        cursor: str | None = None
        while True:
            page = await self._run(
                calls.export_page(
                    user_id=user_id,
                    history=history,
                    cursor=cursor,
                    limit=page_size,
                    consistency=consistency,
                    as_of=as_of,
                )
            )
            for line in page.lines:
                yield line
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, call: Call[T]) -> T:
        url, content = call.url(self.api_url), call.content()
        response: httpx.Response | NotFound
        try:
            response = await AsyncRetrying(**calls.retry_policy(self._retries))(self._send, call.method, url, content)
        except Retryable as failed:
            raise calls.given_up(failed) from failed.__cause__
        except NotFound as missing:
            response = missing
        return calls.finish(call, response)

    async def _send(self, method: str, url: str, content: bytes) -> httpx.Response:
        headers = self._signer.headers(method, url, content)
        try:
            response = await self._http.request(method, url, content=content or None, headers=headers)
        except httpx.TransportError as exc:
            raise calls.unreachable(self.api_url, exc) from exc
        calls.check_answer(response, self.api_url)
        return response
