"""``rushmem instructions``: a project's extraction instructions (show, set from a JSON file, history)."""

from __future__ import annotations

import argparse
import sys

from pydantic import ValidationError

from rushmem.service import Memory
from rushmem_contract.errors import InvalidInput
from rushmem_contract.instructions import ExtractionInstructions
from rushmem_contract.models import describe_errors, error_field
from rushmem_tools.cli.output import AddCommand, emit


def cmd_instructions(service: Memory, args: argparse.Namespace) -> int:
    if args.set is not None:
        text = sys.stdin.read() if args.set == "-" else open(args.set, encoding="utf-8").read()  # noqa: SIM115
        try:
            wanted = ExtractionInstructions.model_validate_json(text)
        except ValidationError as exc:
            raise InvalidInput(describe_errors(exc, "instructions"), field=error_field(exc)) from exc
        emit(service.set_instructions(wanted, user_id=args.user, project_id=args.project, source=args.source))
    elif args.history:
        for version in service.instructions_history(user_id=args.user, project_id=args.project):
            emit(version)
    else:
        emit(service.instructions(user_id=args.user, project_id=args.project))
    return 0


def register(add: AddCommand) -> None:
    p = add(
        "instructions",
        cmd_instructions,
        "a project's extraction instructions (what its extractor keeps and ignores, its own categories): "
        "print them, replace them (--set FILE, JSON), or print every version (--history)",
    )
    p.add_argument("--user", required=True)
    p.add_argument("--project", help="the project (default: the user's conversations without one)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--set", metavar="FILE", help='a JSON object {"instructions", "keep", "ignore", "categories"}')
    action.add_argument("--history", action="store_true", help="every stored version, oldest first")
    p.add_argument("--source", default="cli")
