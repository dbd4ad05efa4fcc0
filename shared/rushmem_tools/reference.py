"""The reference lists of the docs, generated from the table of operations so that they cannot drift:
the HTTP routes (docs/api.md), the MCP tools as the server lists them (docs/mcp.md), the CLI's
subcommands (docs/cli.md) and the Python methods (docs/api.md). They name each operation's request
model, not its fields: the fields are the OpenAPI document's (shared/typescript/openapi.json,
``rushmem serve --docs``), so that a new field is written in its model and nowhere else by hand.
Each sits between markers (``<!-- routes:start -->`` ... ``<!-- routes:end -->``); ``rushmem
reference`` regenerates them and tests/unit/test_docs.py fails when one is stale."""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rushmem_contract import operations as ops
from rushmem_contract.methods import Method, Operations


def _field_names(model: type[Any]) -> set[str]:
    """A request's fields, a nested model's included (the CLI flattens GET /memories' filters)."""
    names = set(model.model_fields)
    for field in model.model_fields.values():
        nested = ops.nested_model(field)
        if nested is not None:
            names |= _field_names(nested)
    return names


def routes_table() -> str:
    """Every route: its request model (the fields and where each travels are the OpenAPI document's)
    and what it answers."""
    lines = ["| route | request | answers |", "| --- | --- | --- |"]
    for op in ops.OPERATIONS:
        request = f"`{op.request.__name__}`"
        if op.body is not None:
            request += f" (body `{op.body.__name__}`; {', '.join(f'`{n}`' for n in op.in_query)} in the query)"
        answer = f"{op.status} `{op.response.__name__}`" if op.response is not None else f"{op.status}"
        lines.append(f"| `{op.method} {op.path}` | {request} | {answer}: {op.summary} |")
    return "\n".join(lines)


def tools_table(surface: str = "all") -> str:
    """The MCP tools as the server lists them: name, what it does, whether in the small surface."""
    import anyio

    from rushmem.mcp.tools import Identity, MemoryTools, build_server, fixed_identity

    server = build_server(MemoryTools(lambda: None, fixed_identity(Identity("-"))), surface)  # type: ignore[arg-type,return-value]

    async def listed() -> list[Any]:
        return list(await server.list_tools())

    core = {op.mcp.name for op in ops.OPERATIONS if op.mcp is not None and op.mcp.core}
    lines = ["| tool | what it does | offered |", "| --- | --- | --- |"]
    for tool in anyio.run(listed):
        first = (tool.description or "").split("\n\n", 1)[0].replace("\n", " ")
        offered = "always" if tool.name in core else "`--tools all`"
        lines.append(f"| `{tool.name}` | {first} | {offered} |")
    return "\n".join(lines)


def commands_table(parser: argparse.ArgumentParser) -> str:
    """The CLI's subcommand for each row (``parser``: the command line's): its words, and the flags
    it has beyond its request's fields (every field is a flag: ``rushmem COMMAND --help``)."""
    sub = next(a for a in parser._actions if a.dest == "command")
    lines = ["| command | operation | words | other flags |", "| --- | --- | --- | --- |"]
    for op in ops.OPERATIONS:
        if op.cli is None:
            continue
        command = sub.choices[op.cli.name]  # type: ignore[index]
        fields = _field_names(op.request)
        words = [a.dest.upper() for a in command._actions if not a.option_strings]
        others = [a.option_strings[-1] for a in command._actions[1:] if a.option_strings and a.dest not in fields]
        lines.append(
            f"| `rushmem {op.cli.name}` | `{op.name}` (`{op.request.__name__}`) | "
            f"{' '.join(f'`{w}`' for w in words) or '-'} | {' '.join(f'`{f}`' for f in others) or '-'} |"
        )
    return "\n".join(lines)


def methods_block() -> str:
    """Every operation as a Python method (the in-process Memory's and both clients'): its positional
    parameters, then its request's fields by keyword; then the in-process Memory's own methods (work
    over many users, lifecycle)."""
    from rushmem import Memory

    lines = ["```python", "# Memory, MemoryClient and AsyncMemoryClient (awaited): the operations"]
    for name, value in sorted(vars(Operations).items()):
        if isinstance(value, Method):
            op = value.op
            alias = f"  # = {op.name}" if name != op.name else ""
            takes = ", ".join([*op.positional, f"**{op.request.__name__}"])
            answer = op.response.__name__ if op.response is not None else "None"
            lines.append(f"{name}({takes}) -> {answer}{alias}")
    lines.append("# Memory's own")
    for name, member in sorted(vars(Memory).items()):
        if not name.startswith("_") and inspect.isfunction(member):
            params = [
                p.replace(annotation=inspect.Parameter.empty) for p in inspect.signature(member).parameters.values()
            ]
            shown = inspect.signature(member).replace(parameters=params[1:], return_annotation=inspect.Signature.empty)
            lines.append(f"{name}{shown}")
    lines.append("```")
    return "\n".join(lines)


def blocks(parser: argparse.ArgumentParser) -> dict[str, tuple[str, Callable[[], str]]]:
    """Each block's name, the page that holds it, and what makes it."""
    return {
        "routes": ("api.md", routes_table),
        "methods": ("api.md", methods_block),
        "tools": ("mcp.md", tools_table),
        "commands": ("cli.md", lambda: commands_table(parser)),
    }


def with_block(text: str, name: str, content: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    first, last = text.find(start), text.find(end)
    if first < 0 or last < first:
        raise ValueError(f"no {start} ... {end} block")
    return text[: first + len(start)] + "\n" + content + "\n" + text[last:]


def regenerated(docs: Path, parser: argparse.ArgumentParser) -> dict[Path, str]:
    """Each page of ``docs`` that holds a block, with its blocks regenerated (``parser``: the
    command line's, which the commands' list reads)."""
    pages: dict[Path, str] = {}
    for name, (page, make) in blocks(parser).items():
        path = docs / page
        pages[path] = with_block(pages.get(path) or path.read_text(encoding="utf-8"), name, make())
    return pages


def write(docs: Path, parser: argparse.ArgumentParser) -> list[str]:
    """Regenerate the blocks in place; the pages that changed."""
    changed = []
    for path, text in regenerated(docs, parser).items():
        if path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(str(path))
    return changed
