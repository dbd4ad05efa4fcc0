"""The ``agent-memory`` command line (see :mod:`.main`)."""

from agent_memory_tools.cli.main import main, main_entry

__all__ = ["main", "main_entry"]
