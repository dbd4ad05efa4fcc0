"""The monthly cost arithmetic, checked on a small price table of round numbers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rushmem.config import Settings
from rushmem.prices import Price
from rushmem_tools.cli import main
from rushmem_tools.costs import (
    GIB,
    HOURS_PER_MONTH,
    STACK_PRICES,
    CostAssumptions,
    CostEstimate,
    StackPriceTable,
    monthly_cost,
)

DAYS = HOURS_PER_MONTH / 24
REPO = Path(__file__).resolve().parents[2]


def _prices(**prices: float) -> StackPriceTable:
    """Every price $1 per unit unless given; the minimums small and explicit."""
    fields = {
        name: Price(usd=prices.get(name, 1.0), unit="unit", source="test")
        for name, field in StackPriceTable.model_fields.items()
        if field.annotation is Price
    }
    return StackPriceTable(
        region="test-1",
        as_of=STACK_PRICES.as_of,
        rds_proxy_min_acu=8,
        rds_proxy_min_vcpu=2,
        rds_instance_vcpus=2,
        comprehend_min_units=3,
        data_api_billing_kb=32,
        **fields,
    )


def _usd(estimate: CostEstimate) -> dict[tuple[str, str], float]:
    return {(line.service, line.item): line.usd for line in estimate.lines}


def test_idle_costs_only_what_stands_still() -> None:
    a = CostAssumptions()
    est = monthly_cost(0, 0, assumptions=a, prices=_prices())
    standing = {k: v for k, v in _usd(est).items() if v}
    idle_receives = a.sqs_idle_pollers * HOURS_PER_MONTH * 3600 / a.sqs_long_poll_s
    assert standing == pytest.approx(
        {
            ("SQS", "SendMessage, ReceiveMessage (long polls), DeleteMessageBatch"): idle_receives,
            ("Aurora", "Serverless v2 capacity"): a.aurora_min_acu * HOURS_PER_MONTH,
            ("Aurora", "storage"): a.base_storage_gb,
            ("RDS Proxy", "billed ACU-hours (at least 8 ACU)"): 8 * HOURS_PER_MONTH,
            ("Secrets Manager", "secrets"): a.secrets,
            ("Secrets Manager", "API calls"): a.secret_api_calls_per_month,
            ("CloudWatch", "alarms"): a.alarms,
            ("VPC", "interface endpoints"): a.endpoint_count * a.availability_zones * HOURS_PER_MONTH,
            # SnapStart (on by default): both 1 GB functions' live snapshots, cached all month.
            ("Lambda", "SnapStart cache (both functions' live snapshots)"): 2 * HOURS_PER_MONTH * 3600,
        }
    )
    assert est.total_usd == pytest.approx(sum(standing.values()))
    assert est.warnings == []


def test_recalls_add_requests_duration_tokens_io_logs_and_traces() -> None:
    a = CostAssumptions()
    idle = _usd(monthly_cost(0, 0, assumptions=a, prices=_prices()))
    per_day = 240
    est = _usd(monthly_cost(0, per_day, assumptions=a, prices=_prices()))
    recalls = per_day * DAYS
    gb = a.recall_memory_mb / 1024
    assert est[("Lambda", "requests (recall + ingest batches)")] == pytest.approx(recalls)
    assert est[("Lambda", "RecallFunction duration")] == pytest.approx(recalls * a.recall_duration_ms / 1000 * gb)
    # SnapStart: a cold start is a restore (per GB, and its duration), not an INIT.
    assert ("Lambda", "cold-start INIT duration") not in est
    assert est[("Lambda", "SnapStart restores (cold starts)")] == pytest.approx(recalls * a.cold_start_fraction * gb)
    assert est[("Lambda", "cold-start restore duration")] == pytest.approx(
        recalls * a.cold_start_fraction * a.restore_duration_ms / 1000 * gb
    )
    without = _usd(monthly_cost(0, per_day, assumptions=CostAssumptions(snapstart=False), prices=_prices()))
    assert without[("Lambda", "cold-start INIT duration")] == pytest.approx(
        recalls * a.cold_start_fraction * a.init_duration_ms / 1000 * gb
    )
    assert not any("SnapStart" in item for _, item in without)
    assert est[("API Gateway", "HTTP API requests")] == pytest.approx(recalls)
    assert est[("Bedrock", "Titan embeddings (queries, facts, related turns)")] == pytest.approx(
        recalls * a.query_tokens
    )
    assert est[("Bedrock", "extraction input")] == 0
    assert est[("Aurora", "I/O requests")] == pytest.approx(recalls * a.aurora_io_per_recall)
    assert est[("Aurora", "Serverless v2 capacity")] == pytest.approx(
        idle[("Aurora", "Serverless v2 capacity")] + recalls * a.aurora_acu_seconds_per_recall / 3600
    )
    assert est[("CloudWatch", "log ingestion")] == pytest.approx(recalls * a.log_bytes_per_recall / GIB)
    assert est[("CloudWatch", "custom metrics (Powertools)")] == a.custom_metrics
    assert est[("X-Ray", "traces recorded")] == pytest.approx(recalls)  # under the 1/s reservoir
    assert est[("VPC", "endpoint data processed")] == pytest.approx(recalls * a.bytes_per_embedding_call / GIB)


def test_conversations_are_batched_extracted_embedded_and_stored() -> None:
    a = CostAssumptions()
    per_day = 2 * 86_400  # 2 a second: a 5 s window fills a batch of 10
    est = _usd(monthly_cost(per_day, 0, assumptions=a, prices=_prices()))
    conversations = per_day * DAYS
    batches = conversations / 10
    facts = conversations * a.facts_per_conversation
    assert est[("Lambda", "requests (recall + ingest batches)")] == pytest.approx(batches)
    assert est[("Lambda", "IngestFunction duration")] == pytest.approx(
        (conversations * a.ingest_duration_ms_per_conversation + batches * a.ingest_overhead_ms_per_invocation)
        / 1000
        * a.ingest_memory_mb
        / 1024
    )
    idle_receives = a.sqs_idle_pollers * HOURS_PER_MONTH * 3600 / a.sqs_long_poll_s
    assert est[("SQS", "SendMessage, ReceiveMessage (long polls), DeleteMessageBatch")] == pytest.approx(
        conversations + max(idle_receives, batches) + batches
    )
    assert est[("Bedrock", "extraction input")] == pytest.approx(conversations * a.extraction_input_tokens)
    assert est[("Bedrock", "extraction output")] == pytest.approx(conversations * a.extraction_output_tokens)
    assert est[("Bedrock", "Titan embeddings (queries, facts, related turns)")] == pytest.approx(
        facts * a.embedding_tokens_per_fact + conversations * a.embedding_tokens_per_conversation
    )
    assert est[("Aurora", "storage")] == pytest.approx(
        a.base_storage_gb + facts * a.months_stored * a.bytes_per_memory / GIB
    )
    # 172,800 a day: the X-Ray reservoir (86,400 a day) then 5% of the rest, for the batches only.
    assert est[("X-Ray", "traces recorded")] == pytest.approx(batches)


def test_xray_samples_above_its_reservoir() -> None:
    a = CostAssumptions()
    per_day = 3 * 86_400
    est = _usd(monthly_cost(0, per_day, assumptions=a, prices=_prices()))
    assert est[("X-Ray", "traces recorded")] == pytest.approx(DAYS * (86_400 + a.xray_rate * 2 * 86_400))


def test_traffic_lines_grow_in_proportion_and_standing_ones_do_not() -> None:
    a = CostAssumptions()
    one = _usd(monthly_cost(100, 100, assumptions=a, prices=_prices()))
    two = _usd(monthly_cost(200, 200, assumptions=a, prices=_prices()))
    idle = _usd(monthly_cost(0, 0, assumptions=a, prices=_prices()))
    for key, usd in one.items():
        if key in {
            ("SQS", "SendMessage, ReceiveMessage (long polls), DeleteMessageBatch"),
            ("CloudWatch", "custom metrics (Powertools)"),
        }:
            continue  # idle polling covers the receives; metrics are a flat fee once sent
        assert two[key] - idle[key] == pytest.approx(2 * (usd - idle[key])), key


def test_the_proxy_bills_its_minimum_and_capacity_stops_at_the_maximum() -> None:
    a = CostAssumptions(aurora_max_acu=2, aurora_min_acu=0.5)
    est = monthly_cost(100_000, 0, assumptions=a, prices=_prices())
    usd = _usd(est)
    assert usd[("Aurora", "Serverless v2 capacity")] == pytest.approx(2 * HOURS_PER_MONTH)
    assert usd[("RDS Proxy", "billed ACU-hours (at least 8 ACU)")] == pytest.approx(8 * HOURS_PER_MONTH)
    assert len(est.warnings) == 1 and "DatabaseMaxCapacity=2" in est.warnings[0]
    # A year of memories: the indexes recall walks need more than the proxy's minimum to stay cached.
    big = monthly_cost(100_000, 0, assumptions=CostAssumptions(aurora_max_acu=64, months_stored=12), prices=_prices())
    acu = _usd(big)[("Aurora", "Serverless v2 capacity")]
    assert acu > 8 * HOURS_PER_MONTH
    assert _usd(big)[("RDS Proxy", "billed ACU-hours (at least 8 ACU)")] == pytest.approx(acu)
    assert big.warnings == []


def test_an_rds_instance_without_a_proxy_or_a_vpc() -> None:
    a = CostAssumptions(database="rds_instance", rds_proxy=False, network="none")
    est = monthly_cost(10, 10, assumptions=a, prices=_prices())
    services = {line.service for line in est.lines if line.usd}
    assert "Aurora" not in services and "RDS Proxy" not in services and "VPC" not in services
    usd = _usd(est)
    assert usd[("RDS", "instance")] == pytest.approx(HOURS_PER_MONTH)
    assert usd[("RDS", "storage")] == 20  # the smallest volume, far above what 10 conversations a day store
    with_proxy = _usd(monthly_cost(10, 10, assumptions=a.model_copy(update={"rds_proxy": True}), prices=_prices()))
    assert with_proxy[("RDS Proxy", "billed vCPU-hours (at least 2)")] == pytest.approx(2 * HOURS_PER_MONTH)


def test_a_nat_gateway_instead_of_endpoints() -> None:
    a = CostAssumptions(network="nat_gateway", nat_gateways=2)
    usd = _usd(monthly_cost(0, 1000, assumptions=a, prices=_prices()))
    assert usd[("VPC", "NAT gateway")] == pytest.approx(2 * HOURS_PER_MONTH)
    assert usd[("VPC", "NAT data processed")] == pytest.approx(1000 * DAYS * a.bytes_per_embedding_call / GIB)
    assert ("VPC", "interface endpoints") not in usd


def test_comprehend_is_billed_its_minimum_per_request() -> None:
    a = CostAssumptions(comprehend_pii=True, facts_per_conversation=2, chars_per_fact=100)
    usd = _usd(monthly_cost(10, 0, assumptions=a, prices=_prices()))
    assert usd[("Comprehend", "DetectPiiEntities (one request per conversation)")] == pytest.approx(10 * DAYS * 3)
    long_facts = a.model_copy(update={"chars_per_fact": 1000})
    usd = _usd(monthly_cost(10, 0, assumptions=long_facts, prices=_prices()))
    assert usd[("Comprehend", "DetectPiiEntities (one request per conversation)")] == pytest.approx(10 * DAYS * 20)
    assert ("Comprehend", "DetectPiiEntities (one request per conversation)") not in _usd(
        monthly_cost(10, 0, prices=_prices())
    )


def test_prices_scale_their_lines() -> None:
    a = CostAssumptions()
    base = _usd(monthly_cost(1000, 1000, assumptions=a, prices=_prices()))
    dearer = _usd(monthly_cost(1000, 1000, assumptions=a, prices=_prices(chat_output_tokens=3.0)))
    assert dearer[("Bedrock", "extraction output")] == pytest.approx(3 * base[("Bedrock", "extraction output")])
    assert dearer[("Bedrock", "extraction input")] == base[("Bedrock", "extraction input")]
    per_million = Price(usd=0.4, per=1e6, unit="requests", source="test")
    assert per_million.cost(2_500_000) == pytest.approx(1.0)


def test_the_table_shows_lines_total_warnings_assumptions_and_sources() -> None:
    est = monthly_cost(100_000, 1000, assumptions=CostAssumptions(months_stored=12))
    text = est.table()
    assert f"{est.total_usd:,.2f}" in text.splitlines()[-1] or f"{est.total_usd:,.2f}" in text
    assert "Warning: the indexes recall walks" in text
    for name in CostAssumptions.model_fields:
        assert f"  {name} = " in text
    assert "https://aws.amazon.com/bedrock/pricing/" in text
    assert "Assumptions:" not in est.table(with_assumptions=False)


def test_default_prices_name_their_pages_and_date() -> None:
    for name in StackPriceTable.model_fields:
        value = getattr(STACK_PRICES, name)
        if isinstance(value, Price):
            # AWS's pricing pages, or AWS's price list file behind them (Nova 2 Lite: docs/cost.md).
            assert value.source.startswith(("https://aws.amazon.com/", "https://pricing.us-east-1.amazonaws.com/")), (
                name
            )
    assert STACK_PRICES.region == "us-east-1"


def test_negative_volumes_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        monthly_cost(-1, 0)


def test_the_command_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    # No database: the estimate needs only the price table.
    argv = ["cost", "--conversations", "1000", "--recalls", "1000", "--brief", "--stack", "existing-micro"]
    assert main(argv, Settings(database_url="postgresql://nowhere.invalid/none")) == 0
    out = capsys.readouterr().out
    assert "1,000 conversations/day" in out and "total" in out and "RDS" in out
    assert "Aurora" not in out and "Assumptions:" not in out


def test_the_data_api_profile_idles_on_storage_secrets_and_the_snapstart_cache() -> None:
    """DatabaseAccess=data-api with no traffic: no proxy, no endpoints, a paused cluster (list prices);
    what stands still is storage, secrets, the alarm and SnapStart's cache (~$7.91 for both functions)."""
    idle = monthly_cost(0, 0, assumptions=CostAssumptions(access="data-api", rds_proxy=False, network="none"))
    services = idle.by_service()
    assert "RDS Proxy" not in services and "VPC" not in services
    assert next(ln for ln in idle.lines if ln.item.startswith("Serverless v2 capacity")).usd == 0
    cache = next(ln for ln in idle.lines if ln.item.startswith("SnapStart cache"))
    assert cache.usd == pytest.approx(2 * HOURS_PER_MONTH * 3600 * 0.0000015046)  # ≈ $7.91
    assert idle.total_usd - cache.usd <= 2.0, idle.table()
    proxy = monthly_cost(0, 0)
    assert proxy.total_usd > 100  # the 0.5 ACU floor, the proxy's 8 ACUs and the endpoints


def test_the_data_api_bills_requests_and_capacity_only_while_awake() -> None:
    a = CostAssumptions(access="data-api", rds_proxy=False, network="none", facts_per_conversation=0)
    prices = _prices()
    light = monthly_cost(0, 10, assumptions=a, prices=prices)  # ten recalls a day: mostly asleep
    busy = monthly_cost(0, 100_000, assumptions=a, prices=prices)  # always awake

    def capacity(estimate: CostEstimate) -> float:
        return next(ln.quantity for ln in estimate.lines if ln.service == "Aurora" and "capacity" in ln.item)

    assert 0 < capacity(light) < 0.05 * 0.5 * HOURS_PER_MONTH
    assert capacity(busy) >= 0.99 * 0.5 * HOURS_PER_MONTH  # awake all month, plus the load above it
    recalls = next(ln for ln in busy.lines if ln.item.startswith("recall requests"))
    # one request, and the answer's 41 KB in 32 KB units (one more)
    assert recalls.quantity == pytest.approx(100_000 * DAYS * (1 + 1))
    assert any("resumes a month" in w for w in light.warnings)


def test_the_cost_command_takes_the_access(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--access", "data-api", "--brief"]) == 0
    out = capsys.readouterr().out
    assert "RDS Proxy" not in out and "RDS Data API" in out


def test_the_dev_profile_idles_on_the_proxy_minimum_and_the_endpoint() -> None:
    """samconfig.toml's dev profile (DatabaseMinCapacity=0 behind RDS Proxy): the paused cluster costs
    nothing idle, the proxy its 8-ACU minimum; awake with traffic like any cluster that may pause."""
    prices = _prices()
    dev = CostAssumptions(aurora_min_acu=0, aurora_max_acu=2)
    idle = _usd(monthly_cost(0, 0, assumptions=dev, prices=prices))
    assert idle[("Aurora", "Serverless v2 capacity (awake 0% of the month, 0 ACU paused)")] == 0
    assert idle[("RDS Proxy", "billed ACU-hours (at least 8 ACU)")] == 8 * HOURS_PER_MONTH
    assert idle[("VPC", "interface endpoints")] == 2 * HOURS_PER_MONTH
    busy = monthly_cost(0, 100_000, assumptions=dev, prices=prices)
    capacity = next(ln.quantity for ln in busy.lines if ln.service == "Aurora" and "capacity" in ln.item)
    assert capacity >= 0.99 * 0.5 * HOURS_PER_MONTH  # awake all month at 0.5 ACU at least
    assert "RDS Data API" not in busy.by_service()


def test_the_cost_command_prices_the_dev_profile(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cost", "--stack", "dev", "--json"]) == 0
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["assumptions"]["aurora_min_acu"] == 0 and estimate["assumptions"]["aurora_max_acu"] == 2
    # The proxy's minimum and the endpoint at list prices (SnapStart off): about $103 a month idle.
    assert estimate["assumptions"]["snapstart"] is False
    assert 98 < estimate["total_usd"] < 110


@pytest.mark.parametrize("profile", ["quickstart", "dev", "prod"])
def test_the_cost_command_knows_samconfigs_profiles_by_name(profile: str, capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    from rushmem_tools.costs import SAMCONFIG_PROFILES

    samconfig = tomllib.loads((REPO / "samconfig.toml").read_text(encoding="utf-8"))
    assert set(SAMCONFIG_PROFILES) == {
        name for name, value in samconfig.items() if isinstance(value, dict) and name != "default"
    }
    # The profile's SnapStart (its parameter_overrides, else the template's default) is what the estimate prices.
    overrides = samconfig[profile]["deploy"]["parameters"]["parameter_overrides"]
    snapstart = 'SnapStart="None"' not in overrides
    assert main(["cost", "--stack", profile, "--brief"]) == 0
    assert ("SnapStart cache" in capsys.readouterr().out) is snapstart


def test_the_quickstart_idles_under_two_dollars_and_says_what_snapstart_would_add(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """samconfig.toml's quickstart sets SnapStart=None (its cluster pauses: a ~15 s resume dwarfs the
    ~0.5 s a snapshot saves): idle it is storage, secrets, the alarm and SQS's polls; --snapstart
    prices the cache it would add."""
    assert main(["cost", "--json"]) == 0
    idle = json.loads(capsys.readouterr().out)
    assert idle["assumptions"]["snapstart"] is False
    assert idle["total_usd"] < 2
    assert main(["cost", "--snapstart", "--json"]) == 0
    cached = json.loads(capsys.readouterr().out)
    assert cached["total_usd"] - idle["total_usd"] == pytest.approx(2 * HOURS_PER_MONTH * 3600 * 0.0000015046, abs=0.01)


def test_bare_cost_prints_the_readmes_deployment_and_its_figure(capsys: pytest.CaptureFixture[str]) -> None:
    """`rushmem cost` alone is the README's deployment (quickstart, SnapStart off), and the idle
    figure the README states is the one it prints."""
    import re

    assert main(["cost", "--json"]) == 0
    bare = json.loads(capsys.readouterr().out)
    assert main(["cost", "--stack", "quickstart", "--json"]) == 0
    assert bare == json.loads(capsys.readouterr().out)
    assert bare["assumptions"]["access"] == "data-api" and bare["assumptions"]["snapstart"] is False
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    stated = re.search(r"about \$(\d+\.\d\d) a month with\s+no traffic", readme)
    assert stated, "README lost its idle figure"
    assert float(stated.group(1)) == pytest.approx(bare["total_usd"], abs=0.005)
