"""Long-term memory for AI agents on PostgreSQL + pgvector.

``from rushmem import Memory; m = Memory(); m.add(...); m.recall(...)``. Importing the
package does no I/O and loads nothing heavy: :class:`Memory`, :class:`Admin` and the public types
(the models the verbs take and return, and the errors they raise) are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rushmem.config import Settings as Settings
    from rushmem.service import Admin as Admin
    from rushmem.service import Memory as Memory
    from rushmem_contract.errors import AgentMemoryError as AgentMemoryError
    from rushmem_contract.errors import Conflict as Conflict
    from rushmem_contract.errors import InputTooLarge as InputTooLarge
    from rushmem_contract.errors import InvalidInput as InvalidInput
    from rushmem_contract.errors import NotFound as NotFound
    from rushmem_contract.errors import ProviderError as ProviderError
    from rushmem_contract.instructions import ExtractionInstructions as ExtractionInstructions
    from rushmem_contract.instructions import ProjectCategory as ProjectCategory
    from rushmem_contract.instructions import StoredInstructions as StoredInstructions
    from rushmem_contract.models import ChatMessage as ChatMessage
    from rushmem_contract.models import ConversationEnded as ConversationEnded
    from rushmem_contract.models import ExportPage as ExportPage
    from rushmem_contract.models import ImportLine as ImportLine
    from rushmem_contract.models import IngestOutcome as IngestOutcome
    from rushmem_contract.models import MemoryChanges as MemoryChanges
    from rushmem_contract.models import MemoryEvent as MemoryEvent
    from rushmem_contract.models import MemoryFilters as MemoryFilters
    from rushmem_contract.models import MemoryPage as MemoryPage
    from rushmem_contract.models import MemoryRecord as MemoryRecord
    from rushmem_contract.models import NewMemory as NewMemory
    from rushmem_contract.models import RecalledMemory as RecalledMemory
    from rushmem_contract.models import RecallResult as RecallResult
    from rushmem_contract.models import StoredIds as StoredIds
    from rushmem_contract.schemas import ErasureReceipt as ErasureReceipt
    from rushmem_contract.schemas import UsageReport as UsageReport

__version__ = "0.1.0"

# Each public name and the module that defines it, imported when the name is first used.
_PUBLIC: dict[str, str] = {
    "Memory": "rushmem.service",
    "Admin": "rushmem.service",
    "Settings": "rushmem.config",
    **dict.fromkeys(
        ("AgentMemoryError", "Conflict", "InputTooLarge", "InvalidInput", "NotFound", "ProviderError"),
        "rushmem_contract.errors",
    ),
    **dict.fromkeys(
        ("ExtractionInstructions", "ProjectCategory", "StoredInstructions"), "rushmem_contract.instructions"
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
        "rushmem_contract.models",
    ),
    **dict.fromkeys(("ErasureReceipt", "UsageReport"), "rushmem_contract.schemas"),
}
__all__ = sorted([*_PUBLIC, "__version__"])


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'rushmem' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return __all__
