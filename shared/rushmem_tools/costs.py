"""What the deployed stack costs a month: public prices, stated assumptions, line items and a total.

The prices are :data:`STACK_PRICES` (the runtime's :mod:`rushmem.prices` and the rest of the
stack's). :func:`monthly_cost` turns
conversations and recalls a day into line items for what ``template.yaml`` creates with its
defaults (arm64 functions of 1024 MB, an SQS queue polled by IngestFunction, an HTTP API, and with
``CreateDatabase=true`` an Aurora Serverless v2 cluster at 0.5 ACU minimum behind RDS Proxy, two
Secrets Manager secrets, log groups, one alarm, X-Ray tracing) plus what the template leaves to
the operator (the route from the VPC to Bedrock); with ``access="data-api"`` (DatabaseAccess=data-api,
``rushmem cost --access data-api``) no proxy and no VPC, the cluster billed only while awake,
and the RDS Data API per request. Free tiers, taxes, data transfer out of AWS,
backups beyond the free allowance and support plans are left out. Run
``rushmem cost --conversations N --recalls M`` to print the table.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from rushmem.prices import DEFAULT_PRICES, Price, PriceTable, UsageAssumptions

HOURS_PER_MONTH = 730.0  # AWS's monthly convention (365 x 24 / 12)
GIB = 1024**3
_AURORA = "https://aws.amazon.com/rds/aurora/pricing/"
_CLOUDWATCH = "https://aws.amazon.com/cloudwatch/pricing/"


class StackPriceTable(PriceTable):
    """The runtime's price table (what one line of usage costs, behind GET /usage) and the prices of
    the rest of the stack: storage, RDS Proxy or the Data API, secrets, logs, the network."""

    aurora_storage_gb_month: Price
    data_api_requests: Price
    data_api_billing_kb: float = Field(
        gt=0, description="A Data API request is billed once per this many KB of payload."
    )
    rds_proxy_acu_hour: Price
    rds_proxy_min_acu: float = Field(ge=0, description="RDS Proxy bills at least this many ACUs behind it.")
    rds_proxy_vcpu_hour: Price
    rds_proxy_min_vcpu: float = Field(ge=0, description="RDS Proxy bills at least this many instance vCPUs.")
    rds_instance_hour: Price
    rds_instance_vcpus: float = Field(gt=0)
    rds_storage_gb_month: Price
    secret_month: Price
    secret_api_calls: Price
    logs_ingest_gb: Price
    logs_storage_gb_month: Price
    custom_metric_month: Price
    alarm_month: Price
    xray_traces: Price
    nat_gateway_hour: Price
    nat_gateway_gb: Price
    interface_endpoint_az_hour: Price
    interface_endpoint_gb: Price
    eventbridge_events: Price
    snapstart_cache_gb_second: Price
    snapstart_restore_gb: Price


# Taken with DEFAULT_PRICES (see rushmem.prices): the RDS Proxy 8-ACU minimum and Secrets Manager
# were matched against a quotation of their page; the others (Aurora storage, the RDS Data API, RDS
# db.t4g.micro and gp3, CloudWatch, X-Ray, NAT, PrivateLink, EventBridge) are the long-standing list
# prices, not re-checked. Check them on the linked pages before quoting a figure.
STACK_PRICES = StackPriceTable(
    **{name: getattr(DEFAULT_PRICES, name) for name in PriceTable.model_fields},
    aurora_storage_gb_month=Price(usd=0.10, unit="GB-month", source=_AURORA, note="Aurora Standard"),
    data_api_requests=Price(
        usd=0.35,
        per=1e6,
        unit="Data API requests (32 KB units)",
        source=_AURORA,
        note="RDS Data API, first billion a month ($0.20 after); each further 32 KB of payload is another request",
    ),
    data_api_billing_kb=32,
    rds_proxy_acu_hour=Price(
        usd=0.015,
        unit="ACU-hour behind the proxy",
        source="https://aws.amazon.com/rds/proxy/pricing/",
        note="Aurora Serverless v2 targets, at least rds_proxy_min_acu",
    ),
    rds_proxy_min_acu=8,
    rds_proxy_vcpu_hour=Price(
        usd=0.015,
        unit="vCPU-hour behind the proxy",
        source="https://aws.amazon.com/rds/proxy/pricing/",
        note="provisioned instances, at least rds_proxy_min_vcpu",
    ),
    rds_proxy_min_vcpu=2,
    rds_instance_hour=Price(
        usd=0.016,
        unit="instance-hour",
        source="https://aws.amazon.com/rds/postgresql/pricing/",
        note="db.t4g.micro, single-AZ, on demand",
    ),
    rds_instance_vcpus=2,
    rds_storage_gb_month=Price(
        usd=0.115, unit="GB-month", source="https://aws.amazon.com/rds/postgresql/pricing/", note="gp3, single-AZ"
    ),
    secret_month=Price(usd=0.40, unit="secret-month", source="https://aws.amazon.com/secrets-manager/pricing/"),
    secret_api_calls=Price(
        usd=0.05, per=10_000, unit="API calls", source="https://aws.amazon.com/secrets-manager/pricing/"
    ),
    logs_ingest_gb=Price(usd=0.50, unit="GB ingested", source=_CLOUDWATCH, note="standard log class"),
    logs_storage_gb_month=Price(usd=0.03, unit="GB-month stored", source=_CLOUDWATCH),
    custom_metric_month=Price(usd=0.30, unit="metric-month", source=_CLOUDWATCH, note="first 10,000 metrics"),
    alarm_month=Price(usd=0.10, unit="alarm-month", source=_CLOUDWATCH, note="standard resolution"),
    xray_traces=Price(usd=5.00, per=1e6, unit="traces recorded", source="https://aws.amazon.com/xray/pricing/"),
    nat_gateway_hour=Price(usd=0.045, unit="NAT gateway-hour", source="https://aws.amazon.com/vpc/pricing/"),
    nat_gateway_gb=Price(usd=0.045, unit="GB processed", source="https://aws.amazon.com/vpc/pricing/"),
    interface_endpoint_az_hour=Price(
        usd=0.01, unit="endpoint-AZ-hour", source="https://aws.amazon.com/privatelink/pricing/"
    ),
    interface_endpoint_gb=Price(
        usd=0.01, unit="GB processed", source="https://aws.amazon.com/privatelink/pricing/", note="first PB a month"
    ),
    eventbridge_events=Price(
        usd=1.00,
        per=1e6,
        unit="custom events (64 KB chunks)",
        source="https://aws.amazon.com/eventbridge/pricing/",
        note="PutEvents to a custom bus; rules and targets are billed by what they invoke",
    ),
    snapstart_cache_gb_second=Price(
        usd=0.0000015046,
        unit="GB-seconds cached",
        source="https://aws.amazon.com/lambda/pricing/",
        note="SnapStart for Python: a published version's snapshot, memory size x time kept (3 hours minimum)",
    ),
    snapstart_restore_gb=Price(
        usd=0.0001397998,
        unit="GB restored",
        source="https://aws.amazon.com/lambda/pricing/",
        note="SnapStart for Python: memory size x each container resumed from the snapshot",
    ),
)


class CostAssumptions(UsageAssumptions):
    """Everything the monthly estimate assumes besides prices and volumes; each field says why its default."""

    database: Literal["aurora_serverless_v2", "rds_instance", "external"] = Field(
        default="aurora_serverless_v2",
        description="aurora_serverless_v2: what CreateDatabase=true creates; rds_instance: an existing "
        "db.t4g.micro; external: a database paid for elsewhere (not counted).",
    )
    access: Literal["proxy", "data-api"] = Field(
        default="proxy",
        description="DatabaseAccess: proxy (RDS Proxy, functions in the VPC) or data-api (the RDS Data API, no proxy, "
        "no VPC, the cluster at 0 ACU pausing when idle).",
    )
    rds_proxy: bool = Field(default=True, description="CreateDatabase=true puts RDS Proxy in front of the cluster.")
    auto_pause_s: float = Field(
        default=300, ge=300, description="DatabaseAutoPauseSeconds (data-api): idle seconds before the cluster pauses."
    )
    awake_acu: float = Field(
        default=0.5, gt=0, description="Capacity of a resumed cluster while it serves requests (data-api)."
    )
    data_api_requests_per_recall: float = Field(
        default=1,
        ge=0,
        description="One statement, the scope inside it (agent_memory_read_as; counted on the stand-in, warm).",
    )
    data_api_requests_per_conversation: float = Field(
        default=9,
        ge=0,
        description="The receipt and the project's extraction instructions read in one statement each, then the "
        "write's transaction: begin, its scope and lock, "
        "the receipt again, the nearest memories, the upsert, the receipt with the usage, commit (counted on the "
        "stand-in, warm; was 12).",
    )
    data_api_recall_kb: float = Field(
        default=41,
        ge=0,
        description="A recall's answer at limit 10: its candidates with their 1024-d vectors as sign bits (measured "
        "on the stand-in; 175 KB at limit 50).",
    )
    aurora_min_acu: float = Field(default=0.5, ge=0, description="DatabaseMinCapacity (template default).")
    aurora_max_acu: float = Field(default=4, gt=0, description="DatabaseMaxCapacity (template default).")
    cached_bytes_per_memory: float = Field(
        default=600,
        ge=0,
        description="What recall wants in the buffer cache per memory: its entries in the scope b-tree and the "
        "full-text (GIN) index; a user's rows are read per recall (a dense user's own HNSW index adds ~4 KB for "
        "each of their memories).",
    )
    rds_instance_memory_gib: float = Field(
        default=1, gt=0, description="db.t4g.micro's memory (database=rds_instance)."
    )
    cache_gib_per_acu: float = Field(
        default=1.5,
        gt=0,
        description="Of an ACU's ~2 GiB, what caches the indexes recall walks (recall stays fast while they fit): "
        "capacity is kept at their size / this at least.",
    )
    base_storage_gb: float = Field(default=1.0, ge=0, description="Catalog, schema and WAL of an empty database.")
    bytes_per_memory: float = Field(
        default=6_000,
        ge=0,
        description="One memory on disk: a 1024-dim vector in the row (4 KB), text, the scope and full-text "
        "indexes, its history event (no table-wide vector index).",
    )
    months_stored: float = Field(
        default=1.0, ge=0, description="Memories kept: this many months of facts (storage grows every month)."
    )
    extraction_input_tokens: float = Field(
        default=1500, ge=0, description="Prompt, last 10 messages and up to 8 related memories."
    )
    embedding_tokens_per_fact: float = Field(default=25, ge=0, description="One short third-person sentence.")
    embedding_tokens_per_conversation: float = Field(
        default=200, ge=0, description="User turns embedded to find related memories (update on write)."
    )
    query_tokens: float = Field(default=30, ge=0, description="The recall query (last user message).")
    ingest_overhead_ms_per_invocation: float = Field(default=50, ge=0, description="Per batch, besides its messages.")
    ingest_batch_size: int = Field(default=10, ge=1, description="IngestBatchSize (template).")
    ingest_batch_window_s: float = Field(default=5, ge=0, description="IngestMaximumBatchingWindowInSeconds.")
    cold_start_fraction: float = Field(
        default=0.02, ge=0, le=1, description="Invocations that start a new execution environment."
    )
    init_duration_ms: float = Field(
        default=1500,
        ge=0,
        description="What a cold start without SnapStart adds to the bill: INIT (the handler's import, Powertools "
        "and the models) and the first request's import of the data path (numpy, psycopg) and its connection; "
        "about 0.4-0.9 s by `rushmem bench coldstart`, with room for Lambda's slower CPU share.",
    )
    snapstart: bool = Field(
        default=True,
        description="SnapStart=PublishedVersions (the template's default and samconfig.toml's prod; quickstart and "
        "dev set None): RecallFunction's and IngestFunction's snapshots are cached all month and each cold start is "
        "a restore (billed per GB) instead of an INIT.",
    )
    snapstart_versions: float = Field(
        default=1,
        ge=0,
        description="Published versions whose snapshot is cached at a time, per function: the live one (a "
        "deploy's previous version is cached until it has not been invoked for 14 days).",
    )
    restore_duration_ms: float = Field(
        default=400, ge=0, description="A SnapStart restore and its after-restore hooks, billed as duration."
    )
    sqs_idle_pollers: int = Field(default=5, ge=0, description="Lambda's SQS pollers long-polling an idle queue.")
    sqs_long_poll_s: float = Field(default=20, gt=0, description="Wait time of each empty receive.")
    log_bytes_per_recall: float = Field(
        default=1500, ge=0, description="Function log lines (START/END/REPORT, structured) and the API access log."
    )
    log_bytes_per_conversation: float = Field(default=2000, ge=0, description="IngestFunction log lines.")
    log_retention_months: float = Field(default=1.0, ge=0, description="LogRetentionDays 30 (stored uncompressed).")
    xray_reservoir_per_s: float = Field(default=1, ge=0, description="X-Ray default rule: 1 request a second ...")
    xray_rate: float = Field(default=0.05, ge=0, le=1, description="... then 5% of the rest, per function.")
    secrets: int = Field(default=2, ge=0, description="DatabaseSecret and AppDatabaseSecret (CreateDatabase=true).")
    secret_api_calls_per_month: float = Field(
        default=1000, ge=0, description="GetSecretValue by RDS Proxy and the migration (IAM auth: none per request)."
    )
    custom_metrics: int = Field(
        default=10, ge=0, description="Metric names the functions publish (billed only in hours they are sent)."
    )
    alarms: int = Field(default=1, ge=0, description="DeadLetterQueueAlarm.")
    network: Literal["none", "vpc_endpoints", "nat_gateway"] = Field(
        default="vpc_endpoints",
        description="How functions in the VPC reach Bedrock (the template creates neither): a bedrock-runtime "
        "interface endpoint, a NAT gateway, or no VPC.",
    )
    endpoint_count: int = Field(default=1, ge=0, description="Interface endpoints (bedrock-runtime).")
    availability_zones: int = Field(default=2, ge=1, description="AZs of the subnets (endpoints are billed per AZ).")
    nat_gateways: int = Field(default=1, ge=0, description="NAT gateways (one AZ; two for AZ-independence).")
    bytes_per_embedding_call: float = Field(
        default=20_000, ge=0, description="A Titan response: 1024 floats as JSON (through the endpoint or NAT)."
    )
    bytes_per_chat_call: float = Field(default=10_000, ge=0, description="Extraction request and answer.")
    comprehend_pii: bool = Field(default=False, description="Names and addresses through Amazon Comprehend.")
    chars_per_fact: float = Field(default=120, ge=0, description="Text sent to Comprehend per memory.")
    recall_calls_comprehend: bool = Field(
        default=False, description="Also run the query through Comprehend (off: only writes are redacted)."
    )
    change_events: bool = Field(default=False, description="EventBusName set: change events on an EventBridge bus.")
    events_per_conversation: float = Field(
        default=3, ge=0, description="Change events a conversation causes (a memory created or refreshed per fact)."
    )
    drain_invocations_per_month: float = Field(
        default=8760, ge=0, description="EventsFunction's scheduled drain, every 5 minutes (730 h x 12)."
    )


class CostLine(BaseModel):
    service: str
    item: str
    quantity: float
    unit: str
    usd: float


class CostEstimate(BaseModel):
    """A month's line items for the given volumes, their total, and what they assume."""

    conversations_per_day: float
    recalls_per_day: float
    lines: list[CostLine]
    assumptions: CostAssumptions
    prices: StackPriceTable
    warnings: list[str] = Field(default_factory=list)

    @property
    def total_usd(self) -> float:
        return sum(line.usd for line in self.lines)

    def by_service(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for line in self.lines:
            totals[line.service] = totals.get(line.service, 0.0) + line.usd
        return totals

    def table(self, *, with_assumptions: bool = True) -> str:
        """A plain-text table: the line items, the total, then the assumptions and price sources."""
        head = (
            f"Monthly cost for {self.conversations_per_day:,.0f} conversations/day and "
            f"{self.recalls_per_day:,.0f} recalls/day ({self.prices.region} list prices of {self.prices.as_of})"
        )
        rows = [("service", "item", "quantity", "unit", "USD/month")]
        rows += [(ln.service, ln.item, _num(ln.quantity), ln.unit, f"{ln.usd:,.2f}") for ln in self.lines]
        rows.append(("total", "", "", "", f"{self.total_usd:,.2f}"))
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        out = [head, ""]
        for i, r in enumerate(rows):
            out.append(
                "  ".join(
                    c.rjust(w) if j in (2, 4) else c.ljust(w) for j, (c, w) in enumerate(zip(r, widths, strict=True))
                )
            )
            if i == 0 or i == len(rows) - 2:
                out.append("  ".join("-" * w for w in widths))
        out += [f"Warning: {warning}" for warning in self.warnings]
        if with_assumptions:
            out += ["", "Assumptions:"]
            for name, field in CostAssumptions.model_fields.items():
                out.append(f"  {name} = {getattr(self.assumptions, name)}: {field.description}")
            out += [
                "  Not counted: free tiers, taxes, data transfer out of AWS, backup storage beyond the cluster's "
                "size, MigrateFunction (runs on deploy), support plans.",
                "",
                "Prices:",
            ]
            for name in StackPriceTable.model_fields:
                price = getattr(self.prices, name)
                if isinstance(price, Price):
                    per = "" if price.per == 1 else f" per {_num(price.per)}"
                    note = f" ({price.note})" if price.note else ""
                    usd = f"{price.usd:.10f}".rstrip("0").rstrip(".")
                    out.append(f"  {name}: ${usd}{per} {price.unit}{note} - {price.source}")
        return "\n".join(out)


def _num(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 or value == int(value) else f"{value:,.3g}"


def _awake_fraction(requests: float, hours: float, pause_s: float) -> float:
    """Of the month, how long the cluster is up: requests arrive at random (Poisson) through the day,
    and it pauses after ``pause_s`` without one, so a gap longer than that is asleep but its first
    ``pause_s``: awake = 1 - e^(-rate x pause_s)."""
    if requests <= 0:
        return 0.0
    rate = requests / (hours * 3600)
    return 1 - math.exp(-rate * pause_s)


def _resumes(requests: float, hours: float, pause_s: float) -> float:
    """Gaps longer than ``pause_s`` a month: each ends with a resume."""
    if requests <= 0:
        return 0.0
    rate = requests / (hours * 3600)
    return requests * math.exp(-rate * pause_s)


def _xray_traces_per_day(requests_per_day: float, a: CostAssumptions) -> float:
    reservoir = a.xray_reservoir_per_s * 86_400
    return min(requests_per_day, reservoir) + a.xray_rate * max(0.0, requests_per_day - reservoir)


@dataclasses.dataclass(frozen=True)
class _Month:
    """What the database's line items are computed from: a month of the given volumes."""

    a: CostAssumptions
    p: StackPriceTable
    hours: float
    recalls: float
    conversations: float
    ingest_invocations: float
    add: Callable[[str, str, float, Price], None]
    warnings: list[str]

    def stored_gb(self, memories: float) -> float:
        return self.a.base_storage_gb + memories * self.a.bytes_per_memory / GIB

    def index_gib(self, memories: float) -> float:
        """What recall walks for ``memories`` and should stay cached."""
        return memories * self.a.cached_bytes_per_memory / GIB


def _aurora(m: _Month, *, memories: float) -> None:
    a, p, hours, recalls, conversations, add = m.a, m.p, m.hours, m.recalls, m.conversations, m.add
    index_gib = m.index_gib(memories)
    cache_acu = index_gib / a.cache_gib_per_acu
    if cache_acu > a.aurora_max_acu:
        m.warnings.append(
            f"the indexes recall walks for {memories:,.0f} memories (~{index_gib:,.1f} GiB) need "
            f"~{cache_acu:,.1f} ACU to stay cached, above DatabaseMaxCapacity={a.aurora_max_acu:g}: recall slows "
            f"down unless it is raised (capacity is counted at the maximum here)"
        )
    floor_acu = min(a.aurora_max_acu, max(a.aurora_min_acu, cache_acu))
    load_acu_hours = (
        recalls * a.aurora_acu_seconds_per_recall + conversations * a.aurora_acu_seconds_per_conversation
    ) / 3600
    if a.access == "data-api" or a.aurora_min_acu == 0:
        acu_hours = _aurora_paused(m, cache_acu=cache_acu, load_acu_hours=load_acu_hours)
    else:
        acu_hours = min(a.aurora_max_acu * hours, floor_acu * hours + load_acu_hours)
        add("Aurora", "Serverless v2 capacity", acu_hours, p.aurora_acu_hour)
    if a.access == "data-api":
        units = p.data_api_billing_kb
        recall_units = a.data_api_requests_per_recall + max(0.0, math.ceil(a.data_api_recall_kb / units) - 1)
        add(
            "RDS Data API",
            "recall requests (a recall's answer: several 32 KB units)",
            recalls * recall_units,
            p.data_api_requests,
        )
        add(
            "RDS Data API",
            "ingest requests",
            conversations * a.data_api_requests_per_conversation,
            p.data_api_requests,
        )
    add("Aurora", "storage", m.stored_gb(memories), p.aurora_storage_gb_month)
    ios = recalls * a.aurora_io_per_recall + conversations * a.aurora_io_per_conversation
    add("Aurora", "I/O requests", ios, p.aurora_io_requests)
    if a.rds_proxy and a.access == "proxy":
        proxy_acu_hours = max(p.rds_proxy_min_acu * hours, acu_hours)
        add(
            "RDS Proxy",
            f"billed ACU-hours (at least {p.rds_proxy_min_acu:g} ACU)",
            proxy_acu_hours,
            p.rds_proxy_acu_hour,
        )


def _aurora_paused(m: _Month, *, cache_acu: float, load_acu_hours: float) -> float:
    """DatabaseMinCapacity=0: the cluster pauses after auto_pause_s without a request and runs at
    awake_acu at least while up (with RDS Proxy too: the proxy's own minimum is billed apart).
    Its capacity line, the resumes' warning; the ACU-hours."""
    a, hours, requests = m.a, m.hours, m.recalls + m.ingest_invocations
    awake = _awake_fraction(requests, hours, a.auto_pause_s)
    floor_acu = max(a.awake_acu, cache_acu) if awake else 0.0
    acu_hours = min(a.aurora_max_acu * hours, floor_acu * hours * awake + load_acu_hours)
    m.add(
        "Aurora",
        f"Serverless v2 capacity (awake {awake:.0%} of the month, 0 ACU paused)",
        acu_hours,
        m.p.aurora_acu_hour,
    )
    resumes = _resumes(requests, hours, a.auto_pause_s)
    if resumes >= 1:
        meanwhile = (
            "a recall answers without memories meanwhile; ingest waits or is redelivered"
            if a.access == "data-api"
            else "through RDS Proxy it may outlast recall's 10 s timeout; ingest is redelivered"
        )
        m.warnings.append(
            f"~{resumes:,.0f} resumes a month from auto-pause: the first request after each waits ~15 s ({meanwhile})"
        )
    return acu_hours


def _rds_instance(m: _Month, *, memories: float) -> None:
    a, p, hours = m.a, m.p, m.hours
    index_gib = m.index_gib(memories)
    if index_gib > a.rds_instance_memory_gib * 0.75:
        m.warnings.append(
            f"the indexes recall walks for {memories:,.0f} memories (~{index_gib:,.1f} GiB) do not fit in the "
            f"instance's {a.rds_instance_memory_gib:g} GiB: recall slows down; choose a larger instance"
        )
    m.add("RDS", "instance", hours, p.rds_instance_hour)
    m.add("RDS", "storage", max(m.stored_gb(memories), 20.0), p.rds_storage_gb_month)  # 20 GB: the smallest gp3
    if a.rds_proxy:
        vcpu_hours = max(p.rds_proxy_min_vcpu, p.rds_instance_vcpus) * hours
        m.add("RDS Proxy", f"billed vCPU-hours (at least {p.rds_proxy_min_vcpu:g})", vcpu_hours, p.rds_proxy_vcpu_hour)


def monthly_cost(
    conversations_per_day: float,
    recalls_per_day: float,
    *,
    assumptions: CostAssumptions | None = None,
    prices: StackPriceTable | None = None,
) -> CostEstimate:
    """Line items for a month (730 hours) of ``conversations_per_day`` ingested conversations and
    ``recalls_per_day`` recalls, from ``prices`` (default: :data:`STACK_PRICES`)."""
    if conversations_per_day < 0 or recalls_per_day < 0:
        raise ValueError("volumes must not be negative")
    a = assumptions or CostAssumptions()
    p = prices or STACK_PRICES
    hours = HOURS_PER_MONTH
    days = hours / 24
    conversations = conversations_per_day * days
    recalls = recalls_per_day * days
    lines: list[CostLine] = []
    warnings: list[str] = []

    def add(service: str, item: str, quantity: float, price: Price) -> None:
        lines.append(CostLine(service=service, item=item, quantity=quantity, unit=price.unit, usd=price.cost(quantity)))

    # --- Lambda ---------------------------------------------------------------------------
    per_second = conversations_per_day / 86_400
    per_batch = min(float(a.ingest_batch_size), max(1.0, per_second * a.ingest_batch_window_s))
    ingest_invocations = conversations / per_batch if conversations else 0.0
    recall_gbs = recalls * a.recall_duration_ms / 1000 * a.recall_memory_mb / 1024
    ingest_gbs = (
        (
            conversations * a.ingest_duration_ms_per_conversation
            + ingest_invocations * a.ingest_overhead_ms_per_invocation
        )
        / 1000
        * (a.ingest_memory_mb / 1024)
    )
    cold_start_gb = a.cold_start_fraction * (
        recalls * a.recall_memory_mb / 1024 + ingest_invocations * a.ingest_memory_mb / 1024
    )
    add("Lambda", "requests (recall + ingest batches)", recalls + ingest_invocations, p.lambda_requests)
    add("Lambda", "RecallFunction duration", recall_gbs, p.lambda_gb_second)
    add("Lambda", "IngestFunction duration", ingest_gbs, p.lambda_gb_second)
    if a.snapstart:
        # The snapshots are kept whether or not anything runs: a standing charge, traffic or none.
        cached_gb = a.snapstart_versions * (a.recall_memory_mb + a.ingest_memory_mb) / 1024
        add(
            "Lambda",
            "SnapStart cache (both functions' live snapshots)",
            cached_gb * hours * 3600,
            p.snapstart_cache_gb_second,
        )
        add("Lambda", "SnapStart restores (cold starts)", cold_start_gb, p.snapstart_restore_gb)
        add("Lambda", "cold-start restore duration", cold_start_gb * a.restore_duration_ms / 1000, p.lambda_gb_second)
    else:
        add("Lambda", "cold-start INIT duration", cold_start_gb * a.init_duration_ms / 1000, p.lambda_gb_second)

    # --- API Gateway, SQS -----------------------------------------------------------------
    add("API Gateway", "HTTP API requests", recalls, p.http_api_requests)
    idle_receives = a.sqs_idle_pollers * (hours * 3600 / a.sqs_long_poll_s)
    sends = conversations * math.ceil(a.message_kb / 64)
    receives = max(idle_receives, ingest_invocations)
    add(
        "SQS",
        "SendMessage, ReceiveMessage (long polls), DeleteMessageBatch",
        sends + receives + ingest_invocations,
        p.sqs_requests,
    )

    # --- Bedrock --------------------------------------------------------------------------
    facts = conversations * a.facts_per_conversation
    embed_tokens = (
        recalls * a.query_tokens
        + facts * a.embedding_tokens_per_fact
        + conversations * a.embedding_tokens_per_conversation
    )
    add("Bedrock", "Titan embeddings (queries, facts, related turns)", embed_tokens, p.embedding_input_tokens)
    add("Bedrock", "extraction input", conversations * a.extraction_input_tokens, p.chat_input_tokens)
    add("Bedrock", "extraction output", conversations * a.extraction_output_tokens, p.chat_output_tokens)

    # --- Comprehend (optional) --------------------------------------------------------------
    if a.comprehend_pii:
        units_per_conversation = max(
            float(p.comprehend_min_units), math.ceil(a.facts_per_conversation * a.chars_per_fact / 100)
        )
        units = conversations * units_per_conversation
        if a.recall_calls_comprehend:
            units += recalls * float(p.comprehend_min_units)
        add("Comprehend", "DetectPiiEntities (one request per conversation)", units, p.comprehend_pii_units)

    # --- change events (optional) -------------------------------------------------------------
    if a.change_events:
        add("EventBridge", "change events (PutEvents)", conversations * a.events_per_conversation, p.eventbridge_events)
        add("Lambda", "EventsFunction scheduled drain (requests)", a.drain_invocations_per_month, p.lambda_requests)
        add(
            "Lambda",
            "EventsFunction scheduled drain (duration)",
            a.drain_invocations_per_month * 0.2 * 512 / 1024,  # ~200 ms at 512 MB, mostly an empty check
            p.lambda_gb_second,
        )

    # --- database ---------------------------------------------------------------------------
    month = _Month(a, p, hours, recalls, conversations, ingest_invocations, add, warnings)
    if a.database == "aurora_serverless_v2":
        _aurora(month, memories=facts * a.months_stored)
    elif a.database == "rds_instance":
        _rds_instance(month, memories=facts * a.months_stored)

    # --- Secrets Manager, CloudWatch, X-Ray ---------------------------------------------------
    if a.secrets:
        add("Secrets Manager", "secrets", float(a.secrets), p.secret_month)
        add("Secrets Manager", "API calls", a.secret_api_calls_per_month, p.secret_api_calls)
    log_gb = (recalls * a.log_bytes_per_recall + conversations * a.log_bytes_per_conversation) / GIB
    add("CloudWatch", "log ingestion", log_gb, p.logs_ingest_gb)
    add("CloudWatch", "log storage", log_gb * a.log_retention_months, p.logs_storage_gb_month)
    busy = recalls > 0 or conversations > 0
    add("CloudWatch", "custom metrics (Powertools)", float(a.custom_metrics if busy else 0), p.custom_metric_month)
    add("CloudWatch", "alarms", float(a.alarms), p.alarm_month)
    traces = days * (
        _xray_traces_per_day(recalls_per_day, a) + _xray_traces_per_day(ingest_invocations / max(days, 1e-9), a)
    )
    add("X-Ray", "traces recorded", traces, p.xray_traces)

    # --- network to Bedrock -------------------------------------------------------------------
    traffic_gb = (
        recalls * a.bytes_per_embedding_call + conversations * (2 * a.bytes_per_embedding_call + a.bytes_per_chat_call)
    ) / GIB
    if a.network == "vpc_endpoints":
        add("VPC", "interface endpoints", a.endpoint_count * a.availability_zones * hours, p.interface_endpoint_az_hour)
        add("VPC", "endpoint data processed", traffic_gb, p.interface_endpoint_gb)
    elif a.network == "nat_gateway":
        add("VPC", "NAT gateway", a.nat_gateways * hours, p.nat_gateway_hour)
        add("VPC", "NAT data processed", traffic_gb, p.nat_gateway_gb)

    return CostEstimate(
        conversations_per_day=conversations_per_day,
        recalls_per_day=recalls_per_day,
        lines=lines,
        assumptions=a,
        prices=p,
        warnings=warnings,
    )


_DATA_API: dict[str, object] = {"access": "data-api", "rds_proxy": False, "network": "none", "aurora_min_acu": 0}
_EXISTING_MICRO: dict[str, object] = {"database": "rds_instance", "rds_proxy": False, "network": "none", "secrets": 2}

# Named starting points for the command line (each a set of CostAssumptions fields). The first three
# are samconfig.toml's profiles, by the same names; DEFAULT_PRESET is the README's deployment.
PRESETS: dict[str, dict[str, object]] = {
    # quickstart: the created cluster through the RDS Data API (no proxy, no VPC, pausing when idle),
    # logs kept 14 days, SnapStart=None: a request that finds the cluster paused waits ~15 s for it,
    # beside which SnapStart's ~0.5 s off a cold start is not worth its $7.91 a month (docs/cost.md).
    "quickstart": {**_DATA_API, "log_retention_months": 14 / 30, "snapstart": False},
    # dev: the created cluster behind RDS Proxy, DatabaseMinCapacity=0 (it pauses when idle; the proxy
    # still bills its 8-ACU minimum), DatabaseMaxCapacity=2, logs kept 7 days; SnapStart=None as in
    # quickstart (the cluster pauses too).
    "dev": {"aurora_min_acu": 0, "aurora_max_acu": 2, "log_retention_months": 7 / 30, "snapstart": False},
    # prod: an existing database (counted as a db.t4g.micro without a proxy), logs kept 90 days.
    "prod": {**_EXISTING_MICRO, "log_retention_months": 3},
    # The template's defaults with CreateDatabase=true (Aurora Serverless v2 at 0.5 ACU behind RDS Proxy).
    "created-database": {},
    "existing-micro": _EXISTING_MICRO,
    # DatabaseAccess=data-api on the template's other defaults (logs kept 30 days).
    "data-api": _DATA_API,
}
DEFAULT_PRESET = "quickstart"
# What `sam deploy --config-env <profile>` deploys; samconfig.toml's [default] is `sam deploy` alone.
SAMCONFIG_PROFILES = ("quickstart", "dev", "prod")
