"""``rushmem mcp``: the memory tools over stdio for one user, for local agents (Claude
Desktop, Cursor, Strands, LangGraph, ...), which start the command and talk JSON-RPC on its
stdin/stdout. Lambda never runs it, so it lives here rather than in the runtime's ``mcp``.

The MCP SDK is imported inside the command, so the other commands never pay for it."""

from __future__ import annotations

import argparse
from typing import Literal

from pydantic import TypeAdapter, ValidationError

from rushmem.service import Memory
from rushmem_contract.errors import InvalidInput
from rushmem_contract.models import ProjectId, UserId, describe_errors
from rushmem_tools.cli.output import AddCommand

_ID: TypeAdapter[str] = TypeAdapter(UserId)
_PROJECT: TypeAdapter[str] = TypeAdapter(ProjectId)


def _checked(value: str, adapter: TypeAdapter[str], field: str) -> str:
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise InvalidInput(describe_errors(exc, field), field=field) from exc


def cmd_mcp(service: Memory, args: argparse.Namespace) -> int:
    user = _checked(args.user, _ID, "--user")
    project = None if args.project is None else _checked(args.project, _PROJECT, "--project")
    import anyio

    surface = args.tools or service.settings.mcp_tools
    anyio.run(lambda: serve_stdio(service, user, project, warm_up=not args.no_warm, surface=surface))
    return 0


async def serve_stdio(
    service: Memory,
    user_id: str,
    project_id: str | None = None,
    *,
    warm_up: bool = True,
    surface: Literal["core", "all"] = "core",
) -> None:
    """Serve until stdin closes. The SDK claims file descriptors 0 and 1 for the protocol while it
    runs and points fd 1 at stderr, so a stray print or log line cannot corrupt the stream.

    The embedder and the database start while the client initialises and lists the tools (a host
    starts the server with the chat, seconds before the first tool call); tool calls wait for them.
    """
    import anyio
    import anyio.to_thread

    from rushmem.mcp.tools import Identity, MemoryTools, build_server, fixed_identity

    tools = MemoryTools(lambda: service, fixed_identity(Identity(user_id, project_id)), offload=True)
    server = build_server(tools, surface)
    async with anyio.create_task_group() as tasks:
        if warm_up:
            tasks.start_soon(anyio.to_thread.run_sync, tools.warm_up)
        await server.run_stdio_async()
        tasks.cancel_scope.cancel()


def register(add: AddCommand) -> None:
    """Adds ``mcp`` through cli.build_parser's ``add`` helper."""
    p = add(
        "mcp",
        cmd_mcp,
        "serve the memory tools over MCP (stdio) for one user: the command an MCP host (Claude Desktop, "
        "Cursor, an agent framework) starts",
    )
    p.add_argument("--user", required=True, help="whose memories every tool call reads and writes")
    p.add_argument("--project", help="the default project of recall, remember and list")
    p.add_argument(
        "--tools",
        choices=("core", "all"),
        help="core: the five tools every model turn pays for (recall, remember, list, correct, forget); all: every "
        "tool (a memory's history, held writes, a conversation hand-over, extraction instructions). Default: "
        "RUSHMEM_MCP_TOOLS, else core",
    )
    p.add_argument("--no-warm", action="store_true", help="load the embedder and connect on the first tool call")
