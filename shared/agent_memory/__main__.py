"""`python -m agent_memory` is the same as `agent-memory`."""

from agent_memory.cli import main_entry

main_entry()
