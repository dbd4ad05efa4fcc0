"""``agent-memory mcp``: the MCP server over stdio for one user (:mod:`agent_memory.mcp.stdio`).

The MCP SDK is imported inside the command, so the other commands never pay for it."""

from __future__ import annotations

import argparse

from pydantic import TypeAdapter, ValidationError

from agent_memory.service import Memory
from agent_memory_contract.errors import InvalidInput
from agent_memory_contract.models import ProjectId, UserId, describe_errors
from agent_memory_tools.cli.serve import AddCommand

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
    from agent_memory.mcp.stdio import run_stdio

    return run_stdio(service, user, project, warm_up=not args.no_warm)


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
    p.add_argument("--no-warm", action="store_true", help="load the embedder and connect on the first tool call")
