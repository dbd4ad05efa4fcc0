"""The service's machinery: one class assembled from a module per kind of work (:mod:`.writing`,
:mod:`.reading` and :mod:`.editing` on it, :mod:`.accounting`, :mod:`.operating`), each on
:mod:`.base` (the settings and the lazily built collaborators). Not public: :class:`Memory` and
:class:`Admin` (:mod:`.memory`) are the verbs callers use."""

from __future__ import annotations

from agent_memory.service.accounting import Accounting
from agent_memory.service.editing import Editing
from agent_memory.service.operating import Operating
from agent_memory.service.writing import Writing


class Engine(Writing, Editing, Accounting, Operating):
    """Every step of every path, on one set of collaborators (built on first use)."""
