"""The one dispatcher every operation runs through, whatever the door: the caller (whose memories
it may touch), then the user's cell, then the operation's verb, then what follows a write (its
usage counts and change events). Each row of the contract's table
(:mod:`rushmem_contract.operations`) has its verb here; a test checks that none is missing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from rushmem.service import accounting, editing, instructing, reading, recalling, reviewing, writing
from rushmem.service.batch import QueueBatch
from rushmem.service.caller import Caller
from rushmem.service.cells import Cells
from rushmem.service.context import context
from rushmem_contract import operations as ops
from rushmem_contract.operations import Operation, Req, Res


@dataclasses.dataclass(frozen=True)
class Verb:
    """An operation's verb: ``run(parts, request, ctx)`` on the user's cell, or, spanning cells,
    ``run(cells, request, ctx)`` (the users listing, erasure and its receipts)."""

    run: Callable[..., Any]
    spans_cells: bool = False


VERBS: dict[str, Verb] = {
    ops.RECALL.name: Verb(recalling.recall),
    ops.ADD.name: Verb(writing.add),
    ops.LIST.name: Verb(reading.list_memories),
    ops.EXPORT.name: Verb(reading.export),
    ops.PENDING.name: Verb(reviewing.pending),
    ops.GET.name: Verb(reading.get),
    ops.UPDATE.name: Verb(editing.update),
    ops.DELETE.name: Verb(editing.delete),
    ops.HISTORY.name: Verb(reading.history),
    ops.FORGET_USER.name: Verb(editing.forget_user, spans_cells=True),
    ops.REVIEW.name: Verb(reviewing.review),
    ops.USERS.name: Verb(accounting.users, spans_cells=True),
    ops.INGEST.name: Verb(writing.ingest_conversation),
    ops.GET_INSTRUCTIONS.name: Verb(instructing.get_instructions),
    ops.SET_INSTRUCTIONS.name: Verb(instructing.set_instructions),
    ops.INSTRUCTIONS_HISTORY.name: Verb(instructing.instructions_history),
    ops.USAGE.name: Verb(accounting.usage),
    ops.ERASURE.name: Verb(editing.erasure, spans_cells=True),
    ops.ERASURES.name: Verb(editing.erasures, spans_cells=True),
}


def dispatch(
    cells: Cells,
    op: Operation[Req, Res],
    request: Req,
    caller: Caller,
    *,
    batch: QueueBatch | None = None,
    **options: Any,
) -> Res:
    """Run one operation for ``caller`` over ``cells`` (see the module's docstring); in a queue
    ``batch``, its writes wait for the batch's flush."""
    verb = VERBS[op.name]
    requested = getattr(request, "user_id", None)
    memory_id = getattr(request, "memory_id", None)
    if requested is None and caller.user is None and op.access == "user" and memory_id is not None:
        # A trusted caller (an operator) may name a memory without its user, as mem0's calls do.
        requested = reading.memory_owner(cells, memory_id)
    user_id = caller.user_for(op, requested)
    ctx = context(caller, user_id, options)
    if verb.spans_cells:
        result: Res = verb.run(cells, request, ctx)
        return result
    assert user_id is not None  # only verbs spanning cells act for no user
    parts = cells.writing(user_id) if op.writes else cells.reading(user_id)
    if batch is not None:
        ctx.unflushed = batch.unflushed(parts)
    result = verb.run(parts, request, ctx)
    if ctx.wrote:
        parts.publish_changes(user_id)
    return result
