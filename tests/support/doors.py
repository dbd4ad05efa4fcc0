"""Every door of the service behind one small interface, so that a promise (redaction, injection
marks, defused tool results, decoders, identity, usage) is tested once and run through each:

- ``cli``: ``rushmem`` (its ``main``, in-process, JSON Lines on stdout, exit codes);
- ``client``: :class:`rushmem_client.MemoryClient` against ``rushmem serve`` over real HTTP;
- ``mcp-stdio``: ``rushmem mcp --user U`` as a subprocess, driven by the MCP SDK's client;
- ``mcp-http``: the SDK's client against ``rushmem serve``'s ``/mcp`` (Streamable HTTP).

The HTTP API (events through RecallFunction) and the queue (IngestFunction) have their own tests
(tests/support/recall.py, tests/support/ingest.py). Each door answers an
:class:`Outcome`: the value, or the refusal with the field it names (an HTTP status where there
is one). The settings come from the environment (AGENT_MEMORY_*), as each door reads them.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from rushmem.config import get_settings
from rushmem_client import MemoryClient
from rushmem_contract.errors import AgentMemoryError, InvalidInput
from rushmem_contract.kinds import error_kind
from rushmem_tools.cli import main as cli_main
from tests.support.recall import serving

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOORS = ("cli", "client", "mcp-stdio", "mcp-http")


@dataclass
class Outcome:
    """What a door answered: ``value`` when it did what was asked, else the refusal."""

    value: Any = None
    refused: bool = False
    status: int | None = None  # the HTTP status (client), or the error table's status (MCP, CLI)
    field: str | None = None
    message: str = ""

    def ok(self) -> Any:
        assert not self.refused, self
        return self.value


def token(sub: str, **claims: Any) -> str:
    """An unsigned JWT (``rushmem serve --unverified-jwt`` passes its claims on)."""
    payload = base64.urlsafe_b64encode(json.dumps({"sub": sub, **claims}).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJub25lIn0.{payload}.sig"


def served() -> contextlib.AbstractContextManager[str]:
    """``rushmem serve --unverified-jwt`` on a free port of 127.0.0.1."""
    return serving()


class Door:
    """The operations the promises need; each door answers them its own way."""

    name: str

    def add(self, user: str, contents: list[str]) -> Outcome:
        raise NotImplementedError

    def update(self, user: str, memory_id: str, changes: dict[str, Any]) -> Outcome:
        raise NotImplementedError

    def list(self, user: str, *, cursor: str | None = None, metadata: Any = None) -> Outcome:
        """The memories (dicts, as the door shows them); a cursor or metadata filter when given."""
        raise NotImplementedError

    def get(self, user: str, memory_id: str) -> Outcome:
        raise NotImplementedError

    def recall(self, user: str, query: str) -> Outcome:
        """{"memories": [...], "prompt_block": "..."}"""
        raise NotImplementedError

    def close(self) -> None:
        pass


# ---- the CLI ----------------------------------------------------------------------------


class CliDoor(Door):
    name = "cli"

    def run(self, *argv: str) -> Outcome:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli_main(list(argv), settings=get_settings())
            except SystemExit as exc:  # argparse
                code = int(exc.code or 0)
        lines = [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]
        if code != 0:
            message = err.getvalue().strip()
            return Outcome(refused=True, status=code, message=message, field=_cli_field(message))
        return Outcome(value=lines)

    def add(self, user: str, contents: list[str]) -> Outcome:
        done = self.run("add", "--user", user, *contents)
        return done if done.refused else Outcome(value=[str(i) for i in done.value[0]["ids"]])

    def update(self, user: str, memory_id: str, changes: dict[str, Any]) -> Outcome:
        argv = ["update", "--user", user, "--id", memory_id]
        for name, value in changes.items():
            argv += [f"--{name.replace('_', '-')}", value if isinstance(value, str) else json.dumps(value)]
        done = self.run(*argv)
        return done if done.refused else Outcome(value=done.value[0])

    def list(self, user: str, *, cursor: str | None = None, metadata: Any = None) -> Outcome:
        assert cursor is None, "the CLI pages by itself"
        argv = ["list", "--user", user, "--json"]
        if metadata is not None:
            argv += ["--metadata", metadata if isinstance(metadata, str) else json.dumps(metadata)]
        return self.run(*argv)

    def get(self, user: str, memory_id: str) -> Outcome:
        done = self.run("get", "--user", user, "--id", memory_id)
        return done if done.refused else Outcome(value=done.value[0])

    def recall(self, user: str, query: str) -> Outcome:
        done = self.run("recall", "--user", user, "--limit", "20", "--json", query)
        return done if done.refused else Outcome(value=done.value[0])


def _cli_field(message: str) -> str | None:
    """The field a CLI refusal names: "rushmem: <message> (<field>)"."""
    if message.endswith(")") and "(" in message:
        return message.rsplit("(", 1)[1].rstrip(")")
    return None


# ---- the Python client against rushmem serve -----------------------------------------


class ClientDoor(Door):
    name = "client"

    def __init__(self, url: str, **auth: Any) -> None:
        self.client = MemoryClient(url, retries=0, timeout=60, **auth)

    def _call(self, fn: Callable[[], Any]) -> Outcome:
        try:
            return Outcome(value=fn())
        except AgentMemoryError as exc:
            field = exc.field if isinstance(exc, InvalidInput) else None
            return Outcome(refused=True, status=error_kind(exc).status, field=field, message=str(exc))

    def add(self, user: str, contents: list[str]) -> Outcome:
        done = self._call(lambda: self.client.add(contents, user_id=user))
        return done if done.refused else Outcome(value=[str(i) for i in done.value.ids])

    def update(self, user: str, memory_id: str, changes: dict[str, Any]) -> Outcome:
        done = self._call(lambda: self.client.update(memory_id, user_id=user, **changes))
        return done if done.refused else Outcome(value=done.value.model_dump(mode="json"))

    def list(self, user: str, *, cursor: str | None = None, metadata: Any = None) -> Outcome:
        filters = None if metadata is None else {"metadata": metadata}
        done = self._call(lambda: self.client.list(user_id=user, cursor=cursor, filters=filters))
        return done if done.refused else Outcome(value=[m.model_dump(mode="json") for m in done.value.memories])

    def get(self, user: str, memory_id: str) -> Outcome:
        done = self._call(lambda: self.client.get(memory_id, user_id=user))
        return done if done.refused else Outcome(value=done.value.model_dump(mode="json"))

    def recall(self, user: str, query: str) -> Outcome:
        done = self._call(lambda: self.client.recall(query, user_id=user, limit=20))
        return done if done.refused else Outcome(value=done.value.model_dump(mode="json"))

    def close(self) -> None:
        self.client.close()


# ---- MCP: stdio and Streamable HTTP, through the SDK's client ------------------------------


def stdio_server(user: str) -> StdioServerParameters:
    # `python -m rushmem_tools` is the console script's main; the environment carries the settings.
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "rushmem_tools", "mcp", "--user", user, "--no-warm"],
        env=dict(os.environ),
        cwd=REPO,
    )


@asynccontextmanager
async def mcp_over_http(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    async with http, Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
        yield client


class McpDoor(Door):
    """One MCP session per user (the user is the transport's, never a tool argument), kept open
    in a blocking portal so that the tests call the tools synchronously."""

    def __init__(self, name: str, connect: Callable[[str], AbstractAsyncContextManager[Client]]) -> None:
        self.name = name
        self._connect = connect
        self._stack = ExitStack()
        self._portal: BlockingPortal = self._stack.enter_context(start_blocking_portal())
        self._clients: dict[str, Client] = {}

    def session(self, user: str) -> Client:
        if user not in self._clients:
            manager = self._portal.wrap_async_context_manager(self._connect(user))
            self._clients[user] = self._stack.enter_context(manager)
        return self._clients[user]

    def call(self, user: str, tool: str, arguments: dict[str, Any]) -> Outcome:
        result = self._portal.call(self.session(user).call_tool, tool, arguments)
        if result.is_error:
            block = result.content[0]
            text = block.text if isinstance(block, TextContent) else str(block)
            return Outcome(refused=True, message=text, field=_tool_field(text))
        return Outcome(value=result.structured_content)

    def add(self, user: str, contents: list[str]) -> Outcome:
        done = self.call(user, "remember", {"memories": contents})
        return done if done.refused else Outcome(value=done.value["ids"])

    def update(self, user: str, memory_id: str, changes: dict[str, Any]) -> Outcome:
        return self.call(user, "update_memory", {"memory_id": memory_id, **changes})

    def list(self, user: str, *, cursor: str | None = None, metadata: Any = None) -> Outcome:
        arguments: dict[str, Any] = {}
        if cursor is not None:
            arguments["cursor"] = cursor
        if metadata is not None:
            arguments["filters"] = {"metadata": metadata}
        done = self.call(user, "list_memories", arguments)
        return done if done.refused else Outcome(value=done.value["memories"])

    def get(self, user: str, memory_id: str) -> Outcome:
        return self.call(user, "get_memory", {"memory_id": memory_id})

    def recall(self, user: str, query: str) -> Outcome:
        return self.call(user, "recall_memories", {"query": query, "limit": 20})

    def close(self) -> None:
        self._stack.close()


def _tool_field(text: str) -> str | None:
    """The field a tool error names, where its message begins: "invalid_input: <field>: <reason>",
    "input_too_large: <field> is N characters; the limit is M"."""
    for code in ("invalid_input: ", "input_too_large: "):
        _, found, rest = text.partition(code)
        if found:
            return rest.split(":", 1)[0].split(" ", 1)[0]
    return None


def mcp_connect_error(connect: AbstractAsyncContextManager[Client]) -> MCPError:
    """The error the SDK's client raises connecting (unwrapped from its task groups)."""
    import anyio

    async def attempt() -> BaseException | None:
        try:
            async with connect as client:
                await client.list_tools()
        except BaseException as exc:
            return exc
        return None

    caught = anyio.run(attempt)
    while isinstance(caught, BaseExceptionGroup) and len(caught.exceptions) == 1:
        caught = caught.exceptions[0]
    assert isinstance(caught, MCPError), caught
    return caught


@contextlib.contextmanager
def open_door(name: str) -> Iterator[Door]:
    """The door ``name`` (one of :data:`DOORS`), on the database the environment names."""
    with ExitStack() as stack:
        door: Door
        if name == "cli":
            door = CliDoor()
        elif name == "client":
            door = ClientDoor(stack.enter_context(served()), auth="none")
        elif name == "mcp-stdio":
            door = McpDoor(name, lambda user: Client(stdio_server(user), mode="legacy"))
        elif name == "mcp-http":
            url = stack.enter_context(served())
            door = McpDoor(name, lambda user: mcp_over_http(url, {"x-memory-user": user}))
        else:
            raise ValueError(name)
        stack.callback(door.close)
        yield door
