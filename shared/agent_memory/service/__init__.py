"""The service facade: what handlers, the CLI and MCP call. Each method checks its input against
the settings, then runs the steps of its path (:mod:`agent_memory.ingest`, :mod:`agent_memory.recall`,
:mod:`agent_memory.manage`, :mod:`agent_memory.schema`) on the lazily built embedder and database.

One class, :class:`MemoryService`, assembled from a module per kind of work: :mod:`.writing`,
:mod:`.reading` (and :mod:`.editing` on it: an edit reads the memory back), :mod:`.accounting`,
:mod:`.admin`; each on :mod:`.base` (the settings and the collaborators).
"""

from __future__ import annotations

import threading

from agent_memory.config import get_settings
from agent_memory.service.accounting import Accounting
from agent_memory.service.admin import Admin
from agent_memory.service.base import utcnow as utcnow
from agent_memory.service.editing import Editing
from agent_memory.service.writing import Writing

# Re-exported: a queue consumer (IngestFunction) keeps one per batch.
from agent_memory.store.writes import UnflushedWrites as UnflushedWrites


class MemoryService(Writing, Editing, Accounting, Admin):
    """Long-term memory for one deployment: remember, recall, list, edit, forget, account, operate.

    Construction is free of I/O; the embedder and the database connection are created
    on first use and then reused (one per process / Lambda container).
    """


_service: MemoryService | None = None
_service_lock = threading.Lock()


def get_service() -> MemoryService:
    """The process-wide service (settings from the environment), built on first call."""
    global _service
    with _service_lock:
        if _service is None:
            _service = MemoryService(get_settings())
        return _service


def set_service(service: MemoryService | None) -> MemoryService | None:
    """Make ``service`` the process-wide one (a local host such as ``agent-memory serve`` runs the
    handlers on the service it built from its own settings); None forgets it. Returns the previous one."""
    global _service
    with _service_lock:
        previous, _service = _service, service
    return previous
