"""Change events: what happened to memories (and users), from the outbox to an EventBridge bus.

The outbox is written in the changing transaction (a trigger, migration 0009), so an event is
never lost when a publish fails; :mod:`.drain` publishes it after commit and again on schedule
until the bus accepts it.
"""

from agent_memory.changes.drain import DrainResult, OutboxStatus, drain_outbox, outbox_status
from agent_memory.changes.outbox import EVENT_TYPES, ChangeEvent

__all__ = ["EVENT_TYPES", "ChangeEvent", "DrainResult", "OutboxStatus", "drain_outbox", "outbox_status"]
