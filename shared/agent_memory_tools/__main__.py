"""`python -m agent_memory_tools` is the same as `agent-memory`."""

from agent_memory_tools.cli import main_entry

main_entry()
