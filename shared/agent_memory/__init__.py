"""Long-term memory for AI agents on PostgreSQL + pgvector.

``from agent_memory import Memory; m = Memory(); m.add(...); m.recall(...)``. Importing the
package does no I/O and loads nothing heavy: :class:`Memory`, :class:`Admin` and the public types
(the models the verbs take and return, and the errors they raise) are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_memory.config import Settings as Settings
    from agent_memory.service import Admin as Admin
    from agent_memory.service import Memory as Memory
    from agent_memory_contract.errors import AgentMemoryError as AgentMemoryError
    from agent_memory_contract.errors import Conflict as Conflict
    from agent_memory_contract.errors import InputTooLarge as InputTooLarge
    from agent_memory_contract.errors import InvalidInput as InvalidInput
    from agent_memory_contract.errors import NotFound as NotFound
    from agent_memory_contract.errors import ProviderError as ProviderError
    from agent_memory_contract.instructions import ExtractionInstructions as ExtractionInstructions
    from agent_memory_contract.instructions import ProjectCategory as ProjectCategory
    from agent_memory_contract.instructions import StoredInstructions as StoredInstructions
    from agent_memory_contract.models import ChatMessage as ChatMessage
    from agent_memory_contract.models import ConversationEnded as ConversationEnded
    from agent_memory_contract.models import ExportPage as ExportPage
    from agent_memory_contract.models import ImportLine as ImportLine
    from agent_memory_contract.models import IngestOutcome as IngestOutcome
    from agent_memory_contract.models import MemoryChanges as MemoryChanges
    from agent_memory_contract.models import MemoryEvent as MemoryEvent
    from agent_memory_contract.models import MemoryFilters as MemoryFilters
    from agent_memory_contract.models import MemoryPage as MemoryPage
    from agent_memory_contract.models import MemoryRecord as MemoryRecord
    from agent_memory_contract.models import NewMemory as NewMemory
    from agent_memory_contract.models import RecalledMemory as RecalledMemory
    from agent_memory_contract.models import RecallResult as RecallResult
    from agent_memory_contract.models import StoredIds as StoredIds
    from agent_memory_contract.schemas import ErasureReceipt as ErasureReceipt
    from agent_memory_contract.schemas import UsageReport as UsageReport

__version__ = "0.1.0"

# Each public name and the module that defines it, imported when the name is first used.
_PUBLIC: dict[str, str] = {
    "Memory": "agent_memory.service",
    "Admin": "agent_memory.service",
    "Settings": "agent_memory.config",
    **dict.fromkeys(
        ("AgentMemoryError", "Conflict", "InputTooLarge", "InvalidInput", "NotFound", "ProviderError"),
        "agent_memory_contract.errors",
    ),
    **dict.fromkeys(
        ("ExtractionInstructions", "ProjectCategory", "StoredInstructions"), "agent_memory_contract.instructions"
    ),
    **dict.fromkeys(
        (
            "ChatMessage",
            "ConversationEnded",
            "ExportPage",
            "ImportLine",
            "IngestOutcome",
            "MemoryChanges",
            "MemoryEvent",
            "MemoryFilters",
            "MemoryPage",
            "MemoryRecord",
            "NewMemory",
            "RecalledMemory",
            "RecallResult",
            "StoredIds",
        ),
        "agent_memory_contract.models",
    ),
    **dict.fromkeys(("ErasureReceipt", "UsageReport"), "agent_memory_contract.schemas"),
}
__all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_memory' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
