"""The one dispatcher every operation runs through, whatever the door: the caller (whose memories
it may touch), then the user's cell, then the operation's verb, then what follows a write (its
usage counts and change events). Each row of the contract's table
(:mod:`rushmem_contract.operations`) has its verb here; a test checks that none is missing.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

from rushmem.service import reading
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


# The modules the verbs live in (SnapStart's warm-up imports them all: :func:`import_verbs`).
_VERB_MODULES: set[str] = set()


def lazy(module: str, function: str) -> Callable[..., Any]:
    """``rushmem.service.<module>.<function>``, imported by its first call: a container's first
    request loads its own verb's path, not every other's (a recall does not import the write path)."""
    _VERB_MODULES.add(module)

    def run(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(f"rushmem.service.{module}"), function)(*args, **kwargs)

    run.__qualname__ = run.__name__ = f"{module}.{function}"
    return run


VERBS: dict[str, Verb] = {
    ops.RECALL.name: Verb(lazy("recalling", "recall")),
    ops.ADD.name: Verb(lazy("writing", "add")),
    ops.LIST.name: Verb(lazy("reading", "list_memories")),
    ops.EXPORT.name: Verb(lazy("reading", "export")),
    ops.PENDING.name: Verb(lazy("reviewing", "pending")),
    ops.GET.name: Verb(lazy("reading", "get")),
    ops.UPDATE.name: Verb(lazy("editing", "update")),
    ops.DELETE.name: Verb(lazy("editing", "delete")),
    ops.HISTORY.name: Verb(lazy("reading", "history")),
    ops.FORGET_USER.name: Verb(lazy("editing", "forget_user"), spans_cells=True),
    ops.REVIEW.name: Verb(lazy("reviewing", "review")),
    ops.USERS.name: Verb(lazy("accounting", "users"), spans_cells=True),
    ops.INGEST.name: Verb(lazy("writing", "ingest_conversation")),
    ops.GET_INSTRUCTIONS.name: Verb(lazy("instructing", "get_instructions")),
    ops.SET_INSTRUCTIONS.name: Verb(lazy("instructing", "set_instructions")),
    ops.INSTRUCTIONS_HISTORY.name: Verb(lazy("instructing", "instructions_history")),
    ops.USAGE.name: Verb(lazy("accounting", "usage")),
    ops.ERASURE.name: Verb(lazy("editing", "erasure"), spans_cells=True),
    ops.ERASURES.name: Verb(lazy("editing", "erasures"), spans_cells=True),
}


def import_verbs() -> None:
    """Import every verb's path now (SnapStart's warm-up, so a restored container imports none)."""
    for module in sorted(_VERB_MODULES):
        importlib.import_module(f"rushmem.service.{module}")


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
