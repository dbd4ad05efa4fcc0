"""Long-term memory for AI agents on PostgreSQL + pgvector.

``from agent_memory import Memory; m = Memory(); m.add(...); m.recall(...)``. Importing the
package does no I/O and loads nothing heavy: :class:`Memory` and :class:`Admin` are imported on
first use (see :mod:`agent_memory.service`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_memory.service import Admin as Admin
    from agent_memory.service import Memory as Memory

__version__ = "0.1.0"
__all__ = ["Admin", "Memory", "__version__"]


def __getattr__(name: str) -> Any:
    if name in ("Memory", "Admin"):
        from agent_memory import service

        return getattr(service, name)
    raise AttributeError(f"module 'agent_memory' has no attribute {name!r}")
