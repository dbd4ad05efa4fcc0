"""The subcommands of the contract's table (:mod:`rushmem_contract.operations`): one per row that
names a :class:`~rushmem_contract.operations.Command`, its flags the request's fields.

A field is a flag named after it (``--user`` for ``user_id``, ``--project`` for ``project_id``,
``--id`` for the id in the path), a nested model's fields in its place; a list is repeatable, an
object is JSON, a boolean a switch; every value reaches the request model as given, so the model
refuses it as every door does (exit 2, naming the field). ``--input FILE`` reads the fields from a
JSON object (the flags win). Answers are JSON on stdout; a page's items one per line, page after
page (``--max-items`` stops early); ``recall`` and ``list`` print text for a person at a terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, Literal, get_args, get_origin

from pydantic import BaseModel

from rushmem.service import Caller, Memory
from rushmem_contract import operations as ops
from rushmem_contract.errors import InvalidInput
from rushmem_contract.kinds import EXIT_OK
from rushmem_contract.operations import Operation
from rushmem_tools.cli.output import AddCommand, emit
from rushmem_tools.cli.text import for_humans, write_memories, write_recall

JSON_HELP = "print JSON Lines even on a terminal (they are printed whenever stdout is not one)"
# Fields whose flag is not their own name.
FLAG_NAMES = {
    "user_id": "--user",
    "project_id": "--project",
    "memory_id": "--id",
    "pending_id": "--id",
    "erasure_id": "--id",
}


def flag_of(name: str, field: Any) -> str:
    return FLAG_NAMES.get(name) or "--" + (field.alias or name).replace("_", "-")


def _inner(annotation: Any) -> Any:
    args = [a for a in get_args(annotation) if a is not type(None)]
    return args[0] if type(None) in get_args(annotation) and len(args) == 1 else annotation


def _model(annotation: Any) -> type[BaseModel] | None:
    inner = _inner(annotation)
    return inner if isinstance(inner, type) and issubclass(inner, BaseModel) else None


def _choices(annotation: Any) -> tuple[Any, ...] | None:
    inner = _inner(annotation)
    if get_origin(inner) is list:
        inner = get_args(inner)[0]
    return get_args(inner) if get_origin(inner) is Literal else None


def _is_scalar_list(annotation: Any) -> bool:
    inner = _inner(annotation)
    return get_origin(inner) is list and _model(get_args(inner)[0]) is None and ops.value_kind(inner) == "list"


def add_fields(
    parser: argparse.ArgumentParser, model: type[BaseModel], hidden: set[str], positional: str | None
) -> None:
    """One flag per field of ``model`` (see the module's docstring)."""
    for name, field in model.model_fields.items():
        if name in hidden:
            continue
        nested = _model(field.annotation)
        if nested is not None and name != positional:
            add_fields(parser, nested, hidden, None)
            continue
        help_ = field.description or ""
        if name == positional:
            # Words after the flags, any number (a text's words are joined): the request model says
            # what is missing, as at every door (--input may give it too).
            parser.add_argument(name, nargs="*", help=help_)
            continue
        flag = flag_of(name, field)
        inner = _inner(field.annotation)
        if inner is bool:
            default = field.get_default(call_default_factory=True)
            action: Any = "store_true" if default is False else argparse.BooleanOptionalAction
            parser.add_argument(flag, dest=name, action=action, default=None, help=help_)
        elif _is_scalar_list(field.annotation):
            parser.add_argument(
                flag, dest=name, action="append", choices=_choices(field.annotation), help=f"{help_} (repeatable)"
            )
        else:
            kind = "object" if ops.value_kind(field.annotation) != "text" else "text"
            metavar = "JSON" if kind == "object" else None
            parser.add_argument(flag, dest=name, metavar=metavar, choices=_choices(field.annotation), help=help_)


def fields_of(args: argparse.Namespace, model: type[BaseModel], within: str = "") -> dict[str, Any]:
    """The request's fields the flags gave (a nested model's gathered in its place; ``within``: its
    path, for the field a refusal names)."""
    given: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        nested = _model(field.annotation)
        if nested is not None and not hasattr(args, name):
            inner = fields_of(args, nested, f"{within}{name}.")
            if inner:
                given[name] = inner
            continue
        value = getattr(args, name, None)
        if value is None or value == []:
            continue
        if isinstance(value, str) and value.lower() in ("null", "none") and _takes_none(field):
            value = None  # `--expires-at null`: clear what may be cleared
        if (
            isinstance(value, str)
            and ops.value_kind(field.annotation) != "text"
            and not _is_scalar_list(field.annotation)
        ):
            value = _json(value, flag_of(name, field), f"{within}{name}")
        given[field.alias or name] = value
    return given


def _takes_none(field: Any) -> bool:
    return type(None) in get_args(field.annotation)


def _json(text: str, flag: str, field: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidInput(f"{flag} is nested too deeply", field=field) from None
    except ValueError as exc:
        raise InvalidInput(f"{flag} is not JSON: {exc}", field=field) from exc


def _input_file(path: str) -> dict[str, Any]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    value = _json(text, "--input", "input")
    if not isinstance(value, dict):
        raise InvalidInput("--input must hold a JSON object of the request's fields", field="input")
    return value


def request_of(op: Operation[Any, Any], args: argparse.Namespace) -> Any:
    """The request the command line gives (refused as every door refuses it)."""
    assert op.cli is not None
    given = _input_file(args.input) if getattr(args, "input", None) else {}
    given.update(fields_of(args, op.request))
    positional = op.cli.positional
    if positional is not None and isinstance(given.get(positional), list):
        field = op.request.model_fields[positional]
        if ops.value_kind(field.annotation) == "text":  # words of one text: `rushmem recall which editor`
            given[positional] = " ".join(given[positional])
    return op.build(**given)


def _pages(service: Memory, op: Operation[Any, Any], request: Any, caller: Caller) -> Iterator[Any]:
    """The answer's items, page after page (an answer that is no page, itself)."""
    while True:
        page = service.invoke(op, request, caller=caller)
        if not ops.is_listing(type(page)):
            yield page
            return
        items, cursor = ops.page_items(page)
        yield from items
        if cursor is None or "cursor" not in op.request.model_fields:
            return
        request = request.model_copy(update={"cursor": cursor})


def _print(op: Operation[Any, Any], answers: Iterator[Any], args: argparse.Namespace, out: IO[str]) -> None:
    if getattr(args, "out", None) and not getattr(args, "queries", None):
        with Path(args.out).open("w", encoding="utf-8") as file:
            _print_to(op, answers, args, file)
        return
    _print_to(op, answers, args, out)


def _print_to(op: Operation[Any, Any], answers: Iterator[Any], args: argparse.Namespace, out: IO[str]) -> None:
    limit = getattr(args, "max_items", None)
    if op is ops.LIST and for_humans(args, out):
        items = list(answers)[:limit] if limit else answers
        write_memories(items, out, str(getattr(args, "user_id", "")))
        return
    for count, item in enumerate(answers, start=1):
        if op is ops.RECALL and for_humans(args, out):
            write_recall(item, out)
        else:
            emit(item, out)
        if limit and count >= limit:
            return


def command(op: Operation[Any, Any]) -> Callable[[Memory, argparse.Namespace], int]:
    """The subcommand's body: the request from the flags, one run (page after page), printed."""

    def run(service: Memory, args: argparse.Namespace) -> int:
        extra = EXTRA_RUN.get(op.name)
        if extra is not None and extra(service, args):
            return EXIT_OK
        request = request_of(op, args)
        caller = Caller(door="cli", requested_by=getattr(args, "by", None) or "cli")
        if op.response is None:
            service.invoke(op, request, caller=caller, source=args.source)
            emit({"done": True})
        elif op.writes:
            emit(service.invoke(op, request, caller=caller, source=args.source))
        else:
            _print(op, _pages(service, op, request, caller), args, sys.stdout)
        return EXIT_OK

    return run


# What a command adds to its generated flags, and runs instead when they are given (recall's batch).
EXTRA_FLAGS: dict[str, Callable[[argparse.ArgumentParser], None]] = {}
EXTRA_RUN: dict[str, Callable[[Memory, argparse.Namespace], bool]] = {}


def register(add: AddCommand) -> None:
    """Every row's subcommand (but ``ingest``, whose file of messages is :mod:`.memories`')."""
    for op in ops.OPERATIONS:
        if op.cli is None or op is ops.INGEST:
            continue
        p = add(op.cli.name, command(op), op.cli.help)
        add_fields(p, op.request, {"consistency"}, op.cli.positional)
        p.add_argument("--input", metavar="FILE", help="the request's fields as a JSON object ('-': stdin); flags win")
        if op.writes:
            p.add_argument("--source", default="cli", help="the source the history records for this change")
        if op is ops.FORGET_USER:
            p.add_argument("--by", default="cli", help="who asks, for the erasure receipt (never the user's id)")
        if op.response is not None and "next_cursor" in op.response.model_fields:
            p.add_argument("--max-items", type=int, help="stop after this many items (pages are followed)")
        if not op.writes:
            p.add_argument("--out", metavar="FILE", help="write the answer (JSON Lines) to FILE instead of stdout")
        if op in (ops.RECALL, ops.LIST):
            p.add_argument("--json", action="store_true", help=JSON_HELP)
        if op.name in EXTRA_FLAGS:
            EXTRA_FLAGS[op.name](p)
