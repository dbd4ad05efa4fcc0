"""The service: :class:`Memory` (the operations, run by the dispatcher: :mod:`.dispatch`) and its
:class:`Admin` (operating the store), what the handlers, the CLI, MCP and in-process callers use.
Each verb (a module per kind of work) checks its input against the settings, runs the pure steps of
its path (:mod:`rushmem.ingest`, :mod:`rushmem.recall`) and the store's transactions
(:mod:`rushmem.store`) in order, on the collaborators of the user's cell (:mod:`.cells`).
"""

from __future__ import annotations

import threading

from rushmem.config import get_settings
from rushmem.service.base import utcnow as utcnow
from rushmem.service.batch import BatchNotDurable as BatchNotDurable
from rushmem.service.caller import Caller as Caller
from rushmem.service.memory import IngestBatch as IngestBatch
from rushmem.service.memory import Memory as Memory
from rushmem.service.operating import Admin as Admin

_service: Memory | None = None
_service_lock = threading.Lock()


def get_service() -> Memory:
    """The process-wide :class:`Memory` (settings from the environment), built on first call."""
    global _service
    with _service_lock:
        if _service is None:
            _service = Memory(get_settings())
        return _service


def built_service() -> Memory | None:
    """The process-wide service if one was built, without building it (shutdown hooks)."""
    with _service_lock:
        return _service


def set_service(service: Memory | None) -> Memory | None:
    """Make ``service`` the process-wide one (a local host such as ``rushmem serve`` runs the
    handlers on the service it built from its own settings); None forgets it. Returns the previous one."""
    global _service
    with _service_lock:
        previous, _service = _service, service
    return previous
