"""Is each configured Bedrock model still offered? ``GetFoundationModel``'s ``modelLifecycle``.

Bedrock retires model versions: a Legacy model keeps answering until its end-of-life date, then
every call fails and every conversation would end in the dead-letter queue. MigrateFunction checks
the configured models on every deploy and ``rushmem smoke --stack`` checks them again (what passes,
warns and fails: docs/deployment.md).

A cross-Region inference profile id (``us.amazon...``, ``global.anthropic...``) is resolved
with ``GetInferenceProfile`` to the foundation model it routes to; that model's lifecycle is the
profile's. botocore's model lists the statuses ACTIVE and LEGACY; anything else is treated as
unusable rather than guessed at.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rushmem.config import Settings
from rushmem.providers.aws import aws_client

# The geographic prefixes of system-defined (cross-Region) inference profile ids.
PROFILE_PREFIXES = ("us", "us-gov", "eu", "apac", "jp", "au", "ca", "global")

# Each role's default model (the Bedrock providers' own defaults: they import them from here, so the
# model checked is the model called) and the template parameter / setting that chooses it.
DEFAULT_EXTRACTION_MODEL = "us.amazon.nova-2-lite-v1:0"
# Nova 2 Lite has no in-Region id: AWS's Amazon Nova 2 user guide ("Core inference") lists the US
# profile (callable from US Regions) and the global one (any commercial Region).
GLOBAL_EXTRACTION_MODEL = "global.amazon.nova-2-lite-v1:0"
DEFAULT_EMBEDDING_MODEL = "amazon.titan-embed-text-v2:0"
DEFAULT_RERANK_MODEL = "amazon.rerank-v1:0"
ROLES = {
    "extraction": ("LlmModel", "RUSHMEM_LLM_MODEL", DEFAULT_EXTRACTION_MODEL),
    "embeddings": ("EmbeddingModel", "RUSHMEM_EMBEDDING_MODEL", DEFAULT_EMBEDDING_MODEL),
    "rerank": ("RerankModel", "RUSHMEM_RERANK_MODEL", DEFAULT_RERANK_MODEL),
}
MISSING_CODES = frozenset({"ResourceNotFoundException", "ValidationException"})


@dataclass(frozen=True)
class ModelCheck:
    """One configured model's lifecycle as Bedrock reports it."""

    role: str
    model_id: str
    foundation_model: str | None
    status: str  # ACTIVE, LEGACY, EOL, MISSING, or another status Bedrock reported
    end_of_life: datetime | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status in {"ACTIVE", "LEGACY"}

    @property
    def warning(self) -> bool:
        return self.status == "LEGACY"

    def message(self) -> str:
        parameter, variable, default = ROLES[self.role]
        behind = f" (routes to {self.foundation_model})" if self.foundation_model not in {None, self.model_id} else ""
        name = f"{self.role} model {self.model_id}{behind}"
        eol = self.end_of_life.date().isoformat() if self.end_of_life else "no date given"
        instead = f"set {parameter} ({variable}) to an Active model" + (
            f", e.g. {default}" if self.model_id != default else ", see Bedrock's model lifecycle page"
        )
        if self.status == "ACTIVE":
            return f"{name} is ACTIVE"
        if self.status == "LEGACY":
            return f"{name} is LEGACY, end of life {eol}: {instead} before then"
        if self.status == "EOL":
            return f"{name} reached its end of life ({eol}): calls fail; {instead}"
        if self.status == "MISSING":
            return f"{name} is not offered in this region ({self.detail}): {instead}"
        return f"{name} has lifecycle status {self.status}: {instead}"


def default_extraction_model(region: str | None) -> str:
    """The extraction model when none is set, for Bedrock in ``region``: the US profile in a US
    Region, the global one elsewhere (the US profile is not callable there: a quickstart in Europe
    failed its first deploy)."""
    in_us = bool(region) and str(region).startswith("us-") and not str(region).startswith("us-gov-")
    return DEFAULT_EXTRACTION_MODEL if in_us else GLOBAL_EXTRACTION_MODEL


def configured_models(settings: Settings, region: str | None = None) -> list[tuple[str, str]]:
    """(role, model id) of every Bedrock model the settings would call from ``region`` (Bedrock's)."""
    found: list[tuple[str, str]] = []
    if settings.llm_provider == "bedrock":
        found.append(("extraction", settings.llm_model or default_extraction_model(region)))
    if settings.embedding_provider == "bedrock":
        found.append(("embeddings", settings.embedding_model or DEFAULT_EMBEDDING_MODEL))
    if settings.rerank_provider == "bedrock":
        found.append(("rerank", settings.rerank_model or DEFAULT_RERANK_MODEL))
    return found


def is_inference_profile(model_id: str) -> bool:
    return model_id.split(".", 1)[0] in PROFILE_PREFIXES or ":inference-profile/" in model_id


def check_models(client: Any, models: Sequence[tuple[str, str]], *, now: datetime | None = None) -> list[ModelCheck]:
    """The lifecycle of each (role, model id), with ``client`` a ``bedrock`` (control plane) client."""
    moment = now or datetime.now(UTC)
    return [_check(client, role, model_id, moment) for role, model_id in models]


def _check(client: Any, role: str, model_id: str, now: datetime) -> ModelCheck:
    from botocore.exceptions import ClientError

    foundation: str | None = model_id
    try:
        if is_inference_profile(model_id):
            profile = client.get_inference_profile(inferenceProfileIdentifier=model_id)
            arns = [m["modelArn"] for m in profile.get("models") or []]
            if not arns:
                return ModelCheck(role, model_id, None, "MISSING", detail="the profile names no model")
            foundation = arns[0].rsplit("/", 1)[-1]
        details = client.get_foundation_model(modelIdentifier=foundation)["modelDetails"]
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        if code in MISSING_CODES:
            return ModelCheck(role, model_id, foundation, "MISSING", detail=code)
        raise
    lifecycle = details.get("modelLifecycle") or {}
    status = str(lifecycle.get("status") or "UNKNOWN")
    end = lifecycle.get("endOfLifeTime")
    end_of_life = end if isinstance(end, datetime) else None
    if end_of_life is not None and end_of_life.tzinfo is None:
        end_of_life = end_of_life.replace(tzinfo=UTC)
    if end_of_life is not None and end_of_life <= now:
        status = "EOL"
    return ModelCheck(role, model_id, foundation, status, end_of_life)


def bedrock_control_client(settings: Settings) -> Any:
    """A ``bedrock`` (control plane) client in the Bedrock region, with bounded timeouts."""
    return aws_client("bedrock", settings.bedrock_region, connect_timeout=5, read_timeout=10, attempts=3)
