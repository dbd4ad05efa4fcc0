"""``agent-memory mcp``: the memory tools over stdio for one user, for local agents (Claude
Desktop, Cursor, Strands, LangGraph, ...), which start the command and talk JSON-RPC on its
stdin/stdout."""

from __future__ import annotations

import anyio
import anyio.to_thread

from agent_memory.mcp.tools import Identity, MemoryTools, build_server, fixed_identity
from agent_memory.service import Memory


async def serve_stdio(service: Memory, user_id: str, project_id: str | None = None, *, warm_up: bool = True) -> None:
    """Serve until stdin closes. The SDK claims file descriptors 0 and 1 for the protocol while it
    runs and points fd 1 at stderr, so a stray print or log line cannot corrupt the stream.

    The embedder and the database start while the client initialises and lists the tools (a host
    starts the server with the chat, seconds before the first tool call); tool calls wait for them.
    """
    tools = MemoryTools(lambda: service, fixed_identity(Identity(user_id, project_id)), offload=True)
    server = build_server(tools)
    async with anyio.create_task_group() as tasks:
        if warm_up:
            tasks.start_soon(anyio.to_thread.run_sync, tools.warm_up)
        await server.run_stdio_async()
        tasks.cancel_scope.cancel()


def run_stdio(service: Memory, user_id: str, project_id: str | None = None, *, warm_up: bool = True) -> int:
    """What ``agent-memory mcp --user U [--project P]`` runs; returns the exit code."""
    anyio.run(lambda: serve_stdio(service, user_id, project_id, warm_up=warm_up))
    return 0
