"""What a verb gets besides its request: whose memories it works on, who called, and the options an
in-process caller or a door may add (the history's source, a message's time, a queue batch, a
benchmark's own plan or query vector). Built by the dispatcher for each call."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import TYPE_CHECKING, Any

from rushmem.service.caller import Caller

if TYPE_CHECKING:
    import numpy as np

    from rushmem.recall.plan import RecallPlan
    from rushmem.store.memories.messages import UnflushedWrites
    from rushmem.usage import Meter


@dataclasses.dataclass
class Context:
    caller: Caller
    user_id: str | None
    # What the history records as the source of a change (default: the caller's door).
    source: str | None = None
    # When the conversation or fact was stated (a queue message's send time).
    observed_at: dt.datetime | None = None
    # A person approved this write (review): not held again.
    reviewed: bool = False
    # Recall: how to find and rank, the query already embedded, and the meter its cost goes to.
    plan: RecallPlan | None = None
    query_vector: np.ndarray | None = None
    usage: Meter | None = None
    # A queue batch's writes, made durable once when the batch ends.
    unflushed: UnflushedWrites | None = None
    # Set by a verb that committed a change: the dispatcher then publishes the change events.
    wrote: bool = False

    @property
    def user(self) -> str:
        """The user of a call that acts for one (the dispatcher resolved it)."""
        if self.user_id is None:
            raise RuntimeError("this operation acts for no user")
        return self.user_id


# The options an in-process call may pass (Memory's verbs' keywords that are no request field).
OPTIONS = frozenset({"source", "observed_at", "reviewed", "plan", "query_vector", "usage", "requested_by", "unflushed"})


def context(caller: Caller, user_id: str | None, options: dict[str, Any]) -> Context:
    """The context of one call: TypeError for an option no verb takes (a typo must not pass)."""
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(unknown)}")
    given = dict(options)
    if "requested_by" in given:
        caller = dataclasses.replace(caller, requested_by=given.pop("requested_by"))
    given.setdefault("source", caller.door)
    return Context(caller=caller, user_id=user_id, **given)
