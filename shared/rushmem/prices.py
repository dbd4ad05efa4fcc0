"""The price table: public us-east-1 list prices, each with the page it comes from, and what one line
of a tenant's usage costs at them (:func:`usage_cost`, behind ``GET /usage``).

:data:`DEFAULT_PRICES` records when the prices were taken. The whole stack's monthly estimate
(``rushmem cost``) extends the same table in :mod:`rushmem_tools.costs`.
"""

from __future__ import annotations

import datetime as dt
import math

from pydantic import BaseModel, ConfigDict, Field


class Price(BaseModel):
    """``usd`` for every ``per`` units of ``unit``, as published on ``source``."""

    model_config = ConfigDict(frozen=True)

    usd: float = Field(ge=0)
    per: float = Field(default=1.0, gt=0)
    unit: str
    source: str
    note: str = ""

    def cost(self, quantity: float) -> float:
        return quantity / self.per * self.usd


_LAMBDA = "https://aws.amazon.com/lambda/pricing/"
_AURORA = "https://aws.amazon.com/rds/aurora/pricing/"
_BEDROCK = "https://aws.amazon.com/bedrock/pricing/"
# AWS's machine-readable price list behind that page (the AWS Price List Bulk API, offer AmazonBedrock).
_PRICE_LIST = "https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonBedrock/current/us-east-1/index.json"


class PriceTable(BaseModel):
    """On-demand list prices of one region (tiered prices: the first tier): what one line of usage
    costs. The stack's other prices extend it in rushmem_tools.costs."""

    model_config = ConfigDict(frozen=True)

    region: str
    as_of: dt.date
    lambda_gb_second: Price
    lambda_requests: Price
    sqs_requests: Price
    http_api_requests: Price
    aurora_acu_hour: Price
    aurora_io_requests: Price
    embedding_input_tokens: Price
    chat_input_tokens: Price
    chat_output_tokens: Price
    comprehend_pii_units: Price
    comprehend_min_units: int = Field(ge=0, description="Units billed at least per Comprehend request.")


# Taken on 2026-12-01 without access to the live pricing pages (no network here but package
# registries): each figure was matched against a copy or quotation of its page found by search
# (Lambda arm64, SQS, HTTP API, Titan V2, Comprehend units and minimum, Aurora ACU-hour/I/O); Nova 2
# Lite's from AWS's price list file (see below). Check them on the linked pages before quoting a
# figure. The rest of the stack's prices (rushmem cost): rushmem_tools.costs.
DEFAULT_PRICES = PriceTable(
    region="us-east-1",
    as_of=dt.date(2026, 12, 1),
    lambda_gb_second=Price(
        usd=0.0000133334,
        unit="GB-second (arm64)",
        source=_LAMBDA,
        note="first 7.5 billion GB-s a month; x86_64 is 0.0000166667",
    ),
    lambda_requests=Price(usd=0.20, per=1e6, unit="requests", source=_LAMBDA),
    sqs_requests=Price(
        usd=0.40,
        per=1e6,
        unit="requests (64 KB chunks)",
        source="https://aws.amazon.com/sqs/pricing/",
        note="standard queue, first 100 billion a month",
    ),
    http_api_requests=Price(
        usd=1.00,
        per=1e6,
        unit="requests (512 KB chunks)",
        source="https://aws.amazon.com/api-gateway/pricing/",
        note="HTTP API, first 300 million a month",
    ),
    aurora_acu_hour=Price(
        usd=0.12, unit="ACU-hour", source=_AURORA, note="Aurora PostgreSQL Serverless v2, Aurora Standard"
    ),
    aurora_io_requests=Price(usd=0.20, per=1e6, unit="I/O requests", source=_AURORA, note="Aurora Standard"),
    embedding_input_tokens=Price(
        usd=0.00002, per=1000, unit="input tokens", source=_BEDROCK, note="Amazon Titan Text Embeddings V2"
    ),
    # Amazon Nova 2 Lite, the default extraction model: AWS's pricing page (HTML) could not be read
    # here; these are AWS's own Price List Bulk API figures (AmazonBedrock, us-east-1, publication
    # 2026-09-01), as transcribed in api-evangelist/amazon-nova (plans/amazon-nova-plans-pricing.yml),
    # and match the listings that pass Bedrock's price through (Vercel AI Gateway: $0.33/$2.75 a million).
    chat_input_tokens=Price(
        usd=0.00033,
        per=1000,
        unit="input tokens",
        source=_PRICE_LIST,
        note="Amazon Nova 2 Lite, us. profile (us-east-1); the global. profile is $0.30 a million (OpenRouter's "
        "listing, Bedrock's price passed through)",
    ),
    chat_output_tokens=Price(
        usd=0.00275,
        per=1000,
        unit="output tokens",
        source=_PRICE_LIST,
        note="Amazon Nova 2 Lite, us. profile (us-east-1); the global. profile is $2.50 a million "
        "(OpenRouter's listing)",
    ),
    comprehend_pii_units=Price(
        usd=0.0001,
        unit="unit of 100 characters",
        source="https://aws.amazon.com/comprehend/pricing/",
        note="DetectPiiEntities",
    ),
    comprehend_min_units=3,
)


class UsageAssumptions(BaseModel):
    """What one unit of each kind of work uses besides prices; each field says why its default."""

    model_config = ConfigDict(frozen=True)

    aurora_acu_seconds_per_recall: float = Field(
        default=0.02, ge=0, description="Capacity one recall uses above the minimum (~5 ms of a vCPU at ~4 ACU/vCPU)."
    )
    aurora_acu_seconds_per_conversation: float = Field(
        default=0.1, ge=0, description="Capacity one conversation's writes use (six round trips, GIN inserts)."
    )
    aurora_io_per_recall: float = Field(
        default=10,
        ge=0,
        description="Storage reads missing the buffer cache: a user's rows not read lately (25-100 pages when "
        "cold, none when cached).",
    )
    aurora_io_per_conversation: float = Field(default=30, ge=0, description="Write I/Os: rows, b-tree and GIN pages.")
    facts_per_conversation: float = Field(default=3, ge=0, description="Memories extracted from one conversation.")
    extraction_output_tokens: float = Field(default=250, ge=0, description="The JSON list of facts.")
    recall_duration_ms: float = Field(default=80, ge=0, description="Warm RecallFunction: embed call plus database.")
    recall_memory_mb: float = Field(default=1024, gt=0, description="RecallFunction MemorySize (template).")
    ingest_duration_ms_per_conversation: float = Field(
        default=3000, ge=0, description="LLM extraction call dominates; embeddings and the write follow."
    )
    ingest_memory_mb: float = Field(default=1024, gt=0, description="IngestFunction MemorySize (template).")
    message_kb: float = Field(default=8, gt=0, description="One ConversationEnded message (billed per 64 KB).")


def _request_usd(duration_ms: float, memory_mb: float, p: PriceTable) -> float:
    """One Lambda invocation of ``duration_ms`` at ``memory_mb``."""
    return p.lambda_requests.cost(1) + p.lambda_gb_second.cost(duration_ms / 1000 * memory_mb / 1024)


def usage_cost(
    kind: str,
    model: str,
    *,
    calls: int,
    input_tokens: int,
    output_tokens: int,
    characters: int,
    items: int = 0,
    assumptions: UsageAssumptions | None = None,
    prices: PriceTable | None = None,
) -> float:
    """What one line of a tenant's usage (``usage_daily``) cost at the price table, in USD: variable
    cost only (docs/cost.md, "A tenant's share"). Embeddings from the ``local`` or ``hash`` embedders
    run inside the function: their time is in the recall's or conversation's Lambda cost. Chat and
    embedding tokens are priced at the table's Bedrock models (Claude 3 Haiku, Titan V2) whichever
    model ran.
    """
    a = assumptions or UsageAssumptions()
    p = prices or DEFAULT_PRICES
    if kind == "recall":
        per_call = (
            _request_usd(a.recall_duration_ms, a.recall_memory_mb, p)
            + p.http_api_requests.cost(1)
            + p.aurora_io_requests.cost(a.aurora_io_per_recall)
            + p.aurora_acu_hour.cost(a.aurora_acu_seconds_per_recall / 3600)
        )
        return calls * per_call
    if kind == "write":
        # POST /memories: a request like a recall, writing instead of reading.
        per_call = _request_usd(a.recall_duration_ms, a.recall_memory_mb, p) + p.http_api_requests.cost(1)
        per_item = p.aurora_io_requests.cost(a.aurora_io_per_conversation / max(a.facts_per_conversation, 1))
        return calls * per_call + items * per_item
    if kind == "conversation":
        per_call = (
            p.lambda_gb_second.cost(a.ingest_duration_ms_per_conversation / 1000 * a.ingest_memory_mb / 1024)
            + p.sqs_requests.cost(2 * math.ceil(a.message_kb / 64))
            + p.aurora_io_requests.cost(a.aurora_io_per_conversation)
            + p.aurora_acu_hour.cost(a.aurora_acu_seconds_per_conversation / 3600)
        )
        return calls * per_call
    if kind == "llm":
        tokens_in = input_tokens or math.ceil(characters / 4)
        tokens_out = output_tokens or round(calls * a.extraction_output_tokens)
        return p.chat_input_tokens.cost(tokens_in) + p.chat_output_tokens.cost(tokens_out)
    if kind == "embedding":
        if model.startswith(("local:", "hash:")):
            return 0.0
        return p.embedding_input_tokens.cost(input_tokens or math.ceil(characters / 4))
    if kind == "pii":
        units = max(calls * p.comprehend_min_units, math.ceil(characters / 100))
        return p.comprehend_pii_units.cost(units)
    return 0.0
