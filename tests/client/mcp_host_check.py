"""`make wheel-check`'s last step: an MCP host starts the server the way docs/mcp.md configures it, the
`rushmem` command of a venv the wheels were installed into (no checkout, no torch), with
`mcp --user me --project my-app`, from an empty directory; the official `mcp` client (as a host runs it)
calls `remember` and then `recall_memories` over stdio, on the default local model.

Usage: python tests/client/mcp_host_check.py /path/to/venv/bin/rushmem. Prints one line per check
and exits non-zero on the first failure."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

# The host configuration of docs/mcp.md and README, with the command's path filled in.
HOST_ARGS = ["mcp", "--user", "me", "--project", "my-app"]


def _host_env(home: str) -> dict[str, str]:
    """What a host passes on: its own environment (here without this checkout's settings or venv), with
    HOME and the XDG data folder pointing at an empty folder so that the embedded database is new."""
    kept = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RUSHMEM_", "AGENT_MEMORY_", "OPENAI_", "VIRTUAL_ENV", "PYTHON"))
    }
    return {**kept, "HOME": home, "XDG_DATA_HOME": str(Path(home) / ".local" / "share")}


async def _session(command: str, work: str) -> dict[str, Any]:
    server = StdioServerParameters(command=command, args=HOST_ARGS, env=_host_env(work), cwd=work)
    async with Client(server) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        stored = await client.call_tool("remember", {"memories": ["The user prefers TypeScript for new services."]})
        assert not stored.is_error, stored.content
        found = await client.call_tool("recall_memories", {"query": "Which language should the new service use?"})
        assert not found.is_error, found.content
        answer: dict[str, Any] = found.structured_content or {}
        name = client.server_info.name if client.server_info else None
        return {"tools": tools, "answer": answer, "name": name}


def main(command: str) -> int:
    executable = Path(command)
    if not executable.is_file():
        print(f"FAIL: no {command}", file=sys.stderr)
        return 1
    venv_python = executable.parent / "python"
    no_torch = subprocess.run(
        [str(venv_python), "-c", "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is not None)"],
        check=False,
    )
    if no_torch.returncode != 0:
        print("FAIL: the venv holds torch; the default install must not", file=sys.stderr)
        return 1
    print("ok: the venv the host line runs from has no torch")
    with tempfile.TemporaryDirectory(prefix="rushmem-mcp-host-") as work:
        outcome = anyio.run(_session, str(executable), work)
        data = Path(work) / ".local" / "share" / "rushmem" / "pgdata" / "PG_VERSION"
        if outcome["name"] != "rushmem" or not data.is_file():
            print(
                f"FAIL: the server calls itself {outcome['name']!r}; {data} exists: {data.is_file()}", file=sys.stderr
            )
            return 1
        print("ok: the server calls itself rushmem and keeps its data in ~/.local/share/rushmem")
    tools, answer = outcome["tools"], outcome["answer"]
    if not {"remember", "recall_memories"} <= tools:
        print(f"FAIL: the server lists {sorted(tools)}", file=sys.stderr)
        return 1
    contents = [memory.get("content") for memory in answer.get("memories", [])]
    if contents != ["The user prefers TypeScript for new services."] or "[RUSH_MEMORY]" not in answer.get(
        "prompt_block", ""
    ):
        print(f"FAIL: recall_memories answered {answer}", file=sys.stderr)
        return 1
    print(f"ok: {executable} {' '.join(HOST_ARGS)} from an empty directory: remember, then recall_memories over stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
