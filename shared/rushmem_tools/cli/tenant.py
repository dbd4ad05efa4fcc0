"""The tenant commands of ``rushmem``: usage, cost, erasure receipts, change events, redaction.

Each parses its arguments, calls one service method (or the price table) and prints JSON, except
``cost``, which prints a table (``--json`` for the estimate as JSON).
"""

from __future__ import annotations

import argparse
import datetime as dt

from rushmem.privacy import PiiPolicy, redact_many
from rushmem.service import Memory
from rushmem_tools import costs
from rushmem_tools.cli.output import AddCommand, emit


def _day(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO date (YYYY-MM-DD): {value!r}") from exc


def cmd_usage_by_user(service: Memory, args: argparse.Namespace) -> int:
    for tenant in service.admin.usage_by_user(start=args.start, end=args.end):
        emit(tenant)
    return 0


def _cost_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``rushmem cost``."""
    parser.add_argument("--conversations", type=float, default=0, help="conversations ingested a day")
    parser.add_argument("--recalls", type=float, default=0, help="recalls a day")
    parser.add_argument(
        "--stack",
        choices=sorted(costs.PRESETS),
        default=costs.DEFAULT_PRESET,
        help="samconfig.toml's profiles: quickstart (the default, the README's deployment: the created cluster "
        "through the Data API, pausing when idle), dev (behind RDS Proxy at 0-2 ACU, pausing when idle), prod "
        "(an existing database, counted as a db.t4g.micro); or created-database (the template's defaults with "
        "CreateDatabase=true: Aurora Serverless v2, RDS Proxy, a bedrock-runtime endpoint), existing-micro, "
        "data-api (as --access data-api)",
    )
    parser.add_argument(
        "--access",
        choices=["proxy", "data-api"],
        help="DatabaseAccess of the created database: data-api is the cheap profile (no proxy, no VPC, auto-pause)",
    )
    parser.add_argument("--database", choices=["aurora_serverless_v2", "rds_instance", "external"])
    parser.add_argument("--no-proxy", action="store_true", help="no RDS Proxy")
    parser.add_argument("--network", choices=["none", "vpc_endpoints", "nat_gateway"])
    parser.add_argument("--comprehend", action="store_true", help="names and addresses through Comprehend")
    parser.add_argument("--events", action="store_true", help="change events on an EventBridge bus (EventBusName)")
    parser.add_argument(
        "--max-acu", type=float, help="DatabaseMaxCapacity (default 4; raise it when the index outgrows the cache)"
    )
    parser.add_argument("--no-llm", action="store_true", help="rules extraction (LlmProvider=rules): no chat calls")
    snapstart = parser.add_mutually_exclusive_group()
    snapstart.add_argument(
        "--no-snapstart", action="store_true", help="SnapStart=None: no snapshot cache, cold starts run INIT"
    )
    snapstart.add_argument(
        "--snapstart",
        action="store_true",
        help="SnapStart=PublishedVersions on a profile that turns it off (quickstart, dev): the cache's cost",
    )
    parser.add_argument("--brief", action="store_true", help="the line items only, no assumptions")


def _estimate(args: argparse.Namespace) -> costs.CostEstimate:
    """The estimate the options of :func:`_cost_arguments` describe."""
    changes: dict[str, object] = dict(costs.PRESETS[args.stack])
    if args.access == "data-api":
        changes.update(costs.PRESETS["data-api"])
    if args.no_proxy:
        changes["rds_proxy"] = False
    if args.comprehend:
        changes["comprehend_pii"] = True
    if args.events:
        changes["change_events"] = True
    if args.max_acu:
        changes["aurora_max_acu"] = args.max_acu
    if args.no_llm:
        changes.update(extraction_input_tokens=0, extraction_output_tokens=0, ingest_duration_ms_per_conversation=200)
    if args.no_snapstart:
        changes["snapstart"] = False
    if args.snapstart:
        changes["snapstart"] = True
    if args.database:
        changes["database"] = args.database
    if args.network:
        changes["network"] = args.network
    return costs.monthly_cost(args.conversations, args.recalls, assumptions=costs.CostAssumptions(**changes))  # type: ignore[arg-type]


def cmd_cost(service: Memory, args: argparse.Namespace) -> int:
    estimate = _estimate(args)
    if args.json:
        emit({**estimate.model_dump(mode="json"), "total_usd": round(estimate.total_usd, 2)})
    else:
        print(estimate.table(with_assumptions=not args.brief))
    return 0


def cmd_events(service: Memory, args: argparse.Namespace) -> int:
    if args.action == "drain":
        result = service.admin.drain_events(user_id=args.user)
        emit({"published": result.published, "failed": result.failed, "last_error": result.last_error})
    status = service.admin.events_status(user_id=args.user)
    emit(
        {
            "pending": status.pending,
            "oldest": status.oldest,
            "failing": status.failing,
            "last_error": status.last_error,
            "bus": service.settings.event_bus,
        }
    )
    return 0


def cmd_redact(service: Memory, args: argparse.Namespace) -> int:
    """What the write path would store for each text (the configured policy, or --mode); regex only."""
    policy = PiiPolicy.parse(args.mode) if args.mode else service.settings.pii
    for result in redact_many(args.text, policy):
        emit({"text": result.text, "action": result.action, "removed": result.removed, "policy": str(policy)})
    return 0


def register(add: AddCommand) -> None:
    p = add("usage-by-user", cmd_usage_by_user, "every user's totals, most expensive first (owner's credentials)")
    p.add_argument("--start", type=_day, help="first UTC day (default: 29 days before --end)")
    p.add_argument("--end", type=_day, help="last UTC day, included (default: today)")

    p = add("cost", cmd_cost, "the stack's monthly cost for a volume, line by line, with its assumptions and prices")
    _cost_arguments(p)
    p.add_argument("--json", action="store_true", help="the estimate as JSON")

    p = add("events", cmd_events, "change events: what waits in the outbox (status), or publish it now (drain)")
    p.add_argument("action", choices=["status", "drain"])
    p.add_argument("--user", help="only this user's events")

    p = add("redact", cmd_redact, "show what RUSHMEM_PII would store for each TEXT (regex detectors)")
    p.add_argument("--mode", help="a policy instead of RUSHMEM_PII, e.g. redact,credential=drop")
    p.add_argument("text", nargs="+")
