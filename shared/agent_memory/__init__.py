"""Long-term memory for AI agents on PostgreSQL + pgvector.

Importing the package does no I/O; see :func:`agent_memory.service.get_service`.
"""

__version__ = "0.1.0"
