"""Typed settings: every knob is a ``RUSHMEM_*`` environment variable (``AGENT_MEMORY_*``, the
names from before the project was called rushmem, are still read, with a deprecation notice).

Nothing here reads the environment at import time; :func:`get_settings` builds
the object on first use and caches it (one per process / Lambda container). One module: the
settings are one model, whose fields are also the table of docs/configuration.md.
"""

from __future__ import annotations

import logging
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from rushmem.privacy import SAFE_DEFAULT_POLICY, PiiPolicySetting
from rushmem.registry import KINDS
from rushmem_contract.instructions import ExtractionInstructions
from rushmem_contract.models import (
    MAX_CONTENT_CHARS,
    MAX_MESSAGE_CHARS,
    MAX_METADATA_CHARS,
    MAX_METADATA_DEPTH,
    MAX_METADATA_KEYS,
    MAX_RECALL_LIMIT,
)

ENV_PREFIX = "RUSHMEM_"
# The settings' prefix before the project was called rushmem: still read, below RUSHMEM_*, so that a
# deployed stack's or a shell's old names keep working while each one used says its new name.
LEGACY_ENV_PREFIX = "AGENT_MEMORY_"
LEGACY_DATA_FOLDER = "agent-memory"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
# The NOLOGIN group roles migration 0003 creates, and prefixes PostgreSQL and RDS reserve.
GROUP_ROLES = ("agent_memory_app", "agent_memory_maintenance")
RESERVED_ROLE_PREFIXES = ("pg_", "rds_", "rdsadmin")


def _names(value: object) -> object:
    """A comma-separated list from the environment ("NAME,ADDRESS") as a tuple of names."""
    if isinstance(value, str):
        return tuple(part.strip().upper() for part in value.split(",") if part.strip())
    return value


def _words(value: object) -> object:
    """A comma-separated list from the environment ("openid,email") as a tuple, case kept."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def default_data_dir() -> Path:
    """Per-user data directory for the embedded PostgreSQL (XDG on Linux: ~/.local/share/rushmem).

    A folder from before the project was called rushmem (``agent-memory``) is moved to the new name
    on first use, while no server runs in it; a running one is left where it is and used there."""
    import platformdirs  # local import: only the embedded default needs it

    new = Path(platformdirs.user_data_dir("rushmem", appauthor=False))
    old = Path(platformdirs.user_data_dir(LEGACY_DATA_FOLDER, appauthor=False))
    return _moved_to(old, new) / "pgdata"


def _moved_to(old: Path, new: Path) -> Path:
    """``new``, after renaming ``old`` to it when only ``old`` exists (same parent: nothing copied)."""
    if new.exists() or not old.exists():
        return new
    if (old / "pgdata" / "postmaster.pid").exists():
        return old  # its server runs (or crashed): moving the directory under it would break it
    try:
        old.rename(new)
    except OSError:  # another process moved it first, or the parent refuses the rename
        return new if new.exists() else old
    logging.getLogger("rushmem").warning("moved the local data folder %s to %s (its new name)", old, new)
    return new


class LegacyEnvSource(EnvSettingsSource):
    """``RUSHMEM_*``, read after ``RUSHMEM_*`` (which wins); each old name in use gets a
    FutureWarning (shown by default: the notice is for whoever set the variable) naming its new one."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls, env_prefix=LEGACY_ENV_PREFIX)

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        if field.validation_alias is not None:
            return None, field_name, False  # its aliases name both prefixes themselves
        return super().get_field_value(field, field_name)

    def __call__(self) -> dict[str, Any]:
        new = {name.lower() for name in self.env_vars if name.lower().startswith(ENV_PREFIX.lower())}
        for name in sorted(self.env_vars):
            if not name.lower().startswith(LEGACY_ENV_PREFIX.lower()):
                continue
            renamed = ENV_PREFIX + name[len(LEGACY_ENV_PREFIX) :].upper()
            if renamed.lower() not in new and renamed[len(ENV_PREFIX) :].lower() in _setting_names():
                # Explicit: a line naming the setting, not pydantic-settings' frame; module="rushmem.config"
                # is what a -W filter names; the registry shows each notice once per process.
                warnings.warn_explicit(
                    f"{name.upper()} is deprecated: set {renamed} (AGENT_MEMORY_* is still read for now)",
                    FutureWarning,
                    filename="rushmem",
                    lineno=0,
                    module="rushmem.config",
                    registry=_NOTICES,
                )
        return super().__call__()


_NOTICES: dict[Any, Any] = {}


def _setting_names() -> frozenset[str]:
    return frozenset(Settings.model_fields)


class Settings(BaseSettings):
    """All configuration of the service. Defaults suit a laptop; Lambda sets the rest."""

    # populate_by_name: Settings(openai_api_key=...) by field name as well as by the aliases below.
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True, populate_by_name=True)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, LegacyEnvSource(settings_cls), dotenv_settings, file_secret_settings

    # --- database -------------------------------------------------------------------
    database_url: SecretStr | None = Field(
        default=None,
        description="PostgreSQL URL (15+ with pgvector). Unset: the embedded server in data_dir.",
    )
    data_dir: Path | None = Field(
        default=None, description="Data directory of the embedded PostgreSQL (default: per-user data dir)."
    )
    db_host: str | None = Field(default=None, description="Host of RDS/Aurora/RDS Proxy (AWS wiring).")
    db_port: int = Field(default=5432, description="Port of db_host.")
    db_name: str = Field(default="postgres", description="Database name on db_host.")
    db_user: str | None = Field(default=None, description="User for IAM authentication on db_host.")
    db_secret_arn: str | None = Field(
        default=None, description="Secrets Manager secret with username/password for db_host."
    )
    db_iam_auth: bool = Field(default=False, description="Authenticate to db_host with an IAM token.")
    db_sslmode: str = Field(default="require", description="sslmode when connecting to db_host.")
    db_role: str | None = Field(
        default=None,
        description="Role to SET after connecting, so row-level security applies even to an owner or superuser "
        "login (the embedded server uses agent_memory_app). Behind RDS Proxy a session-level SET pins every "
        "session: log in as app_db_user instead.",
    )
    app_db_user: str | None = Field(
        default=None,
        description="Login role of the request-serving functions, never the table owner. `rushmem migrate` "
        "(on AWS the deploy's MigrateFunction) creates it when missing (needs CREATEROLE) and makes it a member "
        "of agent_memory_app; an existing role keeps its attributes.",
    )
    app_db_secret_arn: str | None = Field(
        default=None,
        description="Secrets Manager secret (username/password) of app_db_user: the migration sets that password "
        "(RDS Proxy logs in with it). Unset: the password is left alone.",
    )
    app_db_iam_auth: bool = Field(
        default=False,
        description="Grant rds_iam to app_db_user when the migration creates it, so it logs in with IAM tokens "
        "straight to RDS/Aurora (not behind RDS Proxy, which logs in with the secret's password).",
    )
    db_prepared_statements: bool = Field(
        default=True,
        description="Let psycopg prepare statements it runs often. Turn off behind RDS Proxy or PgBouncer in "
        "transaction mode: named prepared statements pin the connection.",
    )
    db_pipeline: bool = Field(
        default=True,
        description="Send each transaction's statements in pipeline mode: a recall is one round trip to the "
        "database, a conversation written two (four when an extraction runs: its redelivery check and the "
        "project's extraction instructions come first; five with an LLM extractor, which is shown the user's "
        "related memories). Turn off if a proxy in front of PostgreSQL mishandles "
        "pipelined requests.",
    )
    db_cluster_arn: str | None = Field(
        default=None,
        description="ARN of an Aurora PostgreSQL cluster to reach through the RDS Data API (HTTPS and IAM, no "
        "connection, no VPC), logging in with db_secret_arn's user on db_name. Takes precedence over db_host.",
    )
    data_api_endpoint_url: str | None = Field(
        default=None,
        description="Where the RDS Data API is (a local stand-in); unset: rds-data.<region>.amazonaws.com.",
    )
    db_resume_wait_s: float = Field(
        default=0.0,
        ge=0,
        description="With db_cluster_arn: how long a statement waits for a cluster resuming from auto-pause (AWS "
        "states about 15 s) before it fails with DatabaseResuming. 0: at once (a recall then answers 'memory "
        "unavailable' and the agent proceeds without memories).",
    )
    db_reader_host: str | None = Field(
        default=None,
        description="Reader endpoint (Aurora's cluster-ro endpoint, or an RDS Proxy READ_ONLY endpoint) with the same "
        "port, database, login and authentication as db_host: recall, list, get, history and export read there unless "
        "a request asks for consistency 'strong'; writes (and the reads a write depends on) use db_host. Unset: "
        "everything on db_host.",
    )
    database_reader_url: SecretStr | None = Field(
        default=None,
        description="PostgreSQL URL of a read replica of database_url (the URL form of db_reader_host).",
    )
    db_reader_retry_after_s: float = Field(
        default=30.0,
        ge=0,
        description="After the reader failed (unreachable, connection lost, replay conflict), reads go to the writer "
        "for this many seconds before the reader is tried again (each failure is logged and counted).",
    )
    db_read_deadline_s: float = Field(
        default=2.5,
        gt=0,
        description="The longest a read waits on one endpoint (connecting included), kept well below the function's "
        "timeout (10 s): a reader that does not answer in time (frozen, partitioned) counts as failed and the read "
        "runs on the writer, which gets the same deadline. Enforced by the client, so it holds when the server "
        "cannot answer at all.",
    )
    db_reader_max_lag_s: float = Field(
        default=1.0,
        ge=0,
        description="Reads go to the writer while the reader's replay is this many seconds behind (checked at most "
        "every db_reader_lag_check_s, on the reader).",
    )
    db_reader_lag_check_s: float = Field(
        default=0.5,
        gt=0,
        description="How long a measure of the reader's replay lag is reused before it is taken again.",
    )
    db_read_your_writes_s: float | None = Field(
        default=None,
        ge=0,
        description="After a write for a user, that user's reads in this container go to the writer for this many "
        "seconds. Unset: db_reader_max_lag_s + db_reader_lag_check_s (by then the reader has the write, or reads "
        "are on the writer anyway).",
    )
    cells: dict[str, SecretStr] | None = Field(
        default=None,
        description="Cells: users spread over independent databases, as a JSON object of cell name -> PostgreSQL URL "
        "(the first is the home cell, which holds the user-to-cell directory; its URL may be empty: this "
        "deployment's own database as the settings above configure it). Every door routes each user to their "
        "cell (docs/capacity.md, Cells). Unset: one database.",
    )
    cells_secret_arn: str | None = Field(
        default=None,
        description="The cells from Secrets Manager, instead of RUSHMEM_CELLS (the stack's CellsSecretArn; "
        "MigrateFunction's is CellsOwnerSecretArn): a secret whose SecretString is that JSON object, read on the first "
        "call that needs a cell. Its home cell's URL must be empty: the home is this deployment's own database "
        "(db_host, db_secret_arn, IAM, RDS Proxy or the Data API), so only the other cells' URLs, with their "
        "passwords, are in the secret (docs/deployment.md, Cells).",
    )
    cell_directory_cache_s: float = Field(
        default=30.0,
        ge=0,
        description="How long a container reuses a user's cell (and whether they are being moved) before it reads "
        "the directory again; a move waits this long between its steps.",
    )
    connect_timeout_s: float = Field(default=5.0, gt=0, description="Seconds to wait for a connection.")
    recall_statement_timeout_ms: int = Field(
        default=2000, ge=0, description="statement_timeout for recall queries (0 = none)."
    )
    auto_migrate: bool = Field(default=True, description="Apply pending migrations when a connection is first opened.")

    # --- embeddings -----------------------------------------------------------------
    # The providers are names in rushmem.registry (built in, or plug-ins' entry points), checked below.
    embedding_provider: str = Field(
        default="local",
        description="local (with the tools), bedrock, openai or hash; or a plug-in's, registered under the entry "
        "point group rushmem.embedders.",
    )
    embedding_model: str | None = Field(
        default=None,
        description="Model id; provider default when unset (all-MiniLM-L6-v2, amazon.titan-embed-text-v2:0, "
        "text-embedding-3-small).",
    )
    embedding_dimensions: int | None = Field(
        default=None, gt=0, description="Output dimension where the provider lets you choose (Titan, OpenAI, hash)."
    )
    embedding_batch_size: int = Field(default=64, gt=0, description="Texts per embedding call.")

    # --- OpenAI-compatible endpoints (Zhipu, OpenAI, ...) -----------------------------
    # OPENAI_BASE_URL and OPENAI_API_KEY too, as OpenAI's own SDK reads them (the prefixed name wins).
    openai_base_url: str = Field(
        default="https://api.openai.com/v1",
        validation_alias=AliasChoices(
            "RUSHMEM_OPENAI_BASE_URL", "AGENT_MEMORY_OPENAI_BASE_URL", "OPENAI_BASE_URL", "openai_base_url"
        ),
        description="Base URL of the API (or OPENAI_BASE_URL).",
    )
    openai_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "RUSHMEM_OPENAI_API_KEY", "AGENT_MEMORY_OPENAI_API_KEY", "OPENAI_API_KEY", "openai_api_key"
        ),
        description="API key (locally; or OPENAI_API_KEY).",
    )
    openai_api_key_secret_arn: str | None = Field(
        default=None, description="Secrets Manager secret holding the API key (in AWS)."
    )

    # --- Bedrock --------------------------------------------------------------------
    bedrock_region: str | None = Field(default=None, description="Region of Bedrock (default: the SDK's).")

    # --- extraction -----------------------------------------------------------------
    llm_provider: str = Field(
        default="rules",
        description="rules, openai or bedrock; or a plug-in's, registered under the entry point group "
        "rushmem.extractors.",
    )
    llm_model: str | None = Field(
        default=None,
        description="Chat model id. Default: glm-4-flash on Zhipu (a bigmodel.cn base URL), else gpt-4o-mini "
        "(openai); us.amazon.nova-2-lite-v1:0 (bedrock: Amazon Nova 2 Lite's US cross-Region inference "
        "profile; global.amazon.nova-2-lite-v1:0 elsewhere).",
    )
    llm_base_url: str | None = Field(default=None, description="Chat endpoint base URL (default openai_base_url).")
    llm_api_key: SecretStr | None = Field(default=None, description="Chat API key (default openai_api_key).")
    llm_api_key_secret_arn: str | None = Field(
        default=None, description="Secrets Manager secret holding the chat API key (in AWS; default: the openai one)."
    )
    llm_json_mode: bool = Field(
        default=True, description="Ask the openai provider for JSON output (response_format json_object)."
    )
    llm_temperature: float = Field(default=0.0, ge=0, le=2, description="Sampling temperature of extraction.")
    llm_max_tokens: int = Field(default=1024, ge=64, le=32768, description="Longest extraction answer, in tokens.")
    extraction_window: int = Field(default=10, ge=1, le=200, description="Last N messages given to extraction.")
    max_extracted_memories: int = Field(
        default=20, ge=1, le=100, description="Memories kept from one conversation's extraction (the rest dropped)."
    )
    extraction_instructions: ExtractionInstructions | None = Field(
        default=None,
        description="The deployment's extraction instructions, as JSON (`instructions`, `keep`, `ignore`, "
        "`categories`; see docs/api.md, Extraction instructions): used for every conversation whose project (or "
        "user, without a project) has none stored through PUT /instructions.",
    )
    related_memories_shown: int = Field(
        default=8,
        ge=0,
        le=50,
        description="Update on write: how many of the user's stored memories most related to a conversation an LLM "
        "extractor (openai, bedrock) is shown, so that it can mark a fact as restating one (refreshed) or replacing "
        "some (superseded). 0 = off. The rules provider is never shown any.",
    )
    supersede_min_similarity: float = Field(
        default=0.45,
        ge=-1,
        le=1.01,
        description="Update on write: the least cosine similarity between a new fact and the memory it restates or "
        "replaces; below it the reference is ignored (logged) and the fact kept as new. Calibrated on "
        "all-MiniLM-L6-v2; check it for your embedder with `rushmem similarity`.",
    )

    # --- remote calls ---------------------------------------------------------------
    http_timeout_s: float = Field(default=20.0, gt=0, description="Timeout of one provider call.")
    max_retries: int = Field(default=3, ge=0, le=10, description="Retries on 429/5xx/timeouts.")
    retry_base_delay_s: float = Field(
        default=0.5,
        ge=0,
        description="Backoff before the first retry; doubles per retry, each wait drawn between half and all "
        "of it (jitter).",
    )
    retry_budget_s: float = Field(
        default=60.0,
        gt=0,
        description="No retry starts whose wait would end after this many seconds (keeps within Lambda's timeout).",
    )

    # --- recall ---------------------------------------------------------------------
    # The rest of the ranking (fusion weights, MMR, the date and hop steps) is fixed in
    # rushmem.recall.plan, at the defaults measured in BENCHMARKS.md.
    half_life_days: float = Field(default=180.0, gt=0, description="Time-decay half-life of non-evergreen memories.")
    decay_floor: float = Field(default=0.9, ge=0, le=1, description="Share of relevance kept however old a memory is.")
    default_limit: int = Field(
        default=10, ge=1, le=MAX_RECALL_LIMIT, description="Memories returned when no limit is given."
    )
    min_score: float = Field(
        default=0.0,
        ge=0,
        description="Leave out recalled memories scoring below this (0 = no floor). Scores depend on the embedder; "
        "RUSHMEM_MIN_RELATIVE_SCORE does not.",
    )
    min_relative_score: float = Field(
        default=0.6,
        ge=0,
        le=1,
        description="Leave out recalled memories scoring below this share of the best one's score, so the block "
        "carries what matters for the request (0 = always fill the limit, as the article does; the default's "
        "measure: docs/recall-quality.md).",
    )

    # --- rerank ---------------------------------------------------------------------
    rerank_provider: str = Field(
        default="none",
        description="Rerank the best fused candidates before MMR: none, bedrock (the Bedrock Rerank API) or cohere "
        "(any Cohere-compatible /rerank endpoint: Cohere, Jina, Voyage, vLLM, ...); or a plug-in's, registered under "
        "the entry point group rushmem.rerankers. A timeout or error keeps the fused order (logged and "
        "counted), never fails a recall.",
    )
    rerank_model: str | None = Field(
        default=None,
        description="Rerank model. Default: amazon.rerank-v1:0 (bedrock; cohere.rerank-v3-5:0 also works), "
        "rerank-v3.5 (cohere).",
    )
    rerank_base_url: str = Field(
        default="https://api.cohere.com/v2",
        description="Base URL of the cohere provider's endpoint; POST {base}/rerank (Jina https://api.jina.ai/v1, "
        "Voyage https://api.voyageai.com/v1, vLLM http://host:8000/v1).",
    )
    rerank_api_key: SecretStr | None = Field(default=None, description="API key of the cohere provider (locally).")
    rerank_api_key_secret_arn: str | None = Field(
        default=None, description="Secrets Manager secret holding the cohere provider's API key (in AWS)."
    )
    rerank_top_n: int = Field(
        default=30,
        ge=1,
        le=200,
        description="How many of the best fused candidates are sent to the reranker (with the date leg's finds).",
    )
    rerank_weight: float = Field(
        default=0.7,
        ge=0,
        le=1,
        description="Share of the reranker's score (mapped onto the range of the candidates' relevance) in a "
        "reranked candidate's relevance; the rest is its fused relevance. Decay, the date boost and MMR then apply "
        "as without a reranker.",
    )
    rerank_timeout_s: float = Field(
        default=1.0,
        gt=0,
        le=30,
        description="Timeout of one rerank call, and the retry budget: a reranker that answers later is skipped "
        "(the fused order stands).",
    )

    # --- limits ---------------------------------------------------------------------
    max_memory_chars: int = Field(
        default=2000,
        ge=16,
        le=MAX_CONTENT_CHARS,
        description=f"Longest memory content accepted (at most {MAX_CONTENT_CHARS}).",
    )
    max_query_chars: int = Field(default=4000, ge=16, description="Longest recall query accepted.")
    max_memories_per_request: int = Field(default=100, ge=1, description="Memories per add/ingest message.")
    max_messages_per_conversation: int = Field(
        default=200, ge=1, le=1000, description="Chat messages in one ingest message (more: the message is invalid)."
    )
    max_message_chars: int = Field(
        default=MAX_MESSAGE_CHARS,
        ge=16,
        le=MAX_MESSAGE_CHARS,
        description="Longest chat message in an ingest message (longer: invalid).",
    )
    max_metadata_chars: int = Field(
        default=MAX_METADATA_CHARS,
        ge=2,
        le=MAX_METADATA_CHARS,
        description=f"Largest metadata of one memory, in characters as JSON (at most {MAX_METADATA_CHARS}).",
    )
    max_metadata_depth: int = Field(
        default=8,
        ge=1,
        le=MAX_METADATA_DEPTH,
        description='Deepest nesting of a memory\'s metadata: {} is 1, {"a": [1]} is 2 (at most '
        f"{MAX_METADATA_DEPTH}; deeper values could not be read back).",
    )
    max_metadata_keys: int = Field(
        default=256,
        ge=1,
        le=MAX_METADATA_KEYS,
        description=f"Most keys in a memory's metadata, counted at every level (at most {MAX_METADATA_KEYS}).",
    )
    review_writes: bool = Field(
        default=False,
        description="Hold a write flagged by the injection or PII detectors, or from an untrusted source, as "
        "pending: never recalled until a person approves it (GET /memories/pending, POST /memories/{id}/review, "
        "`rushmem pending` / `review`, the page). Consolidation then proposes its merges and retirements there "
        "instead of making them.",
    )
    untrusted_sources: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_words)] = Field(
        default=(),
        description="With RUSHMEM_REVIEW_WRITES, sources whose every write waits for review (comma-separated): "
        "api, mcp, cli, conversation (any conversation, queue or HTTP), or a conversation id.",
    )
    prompt_guard: bool = Field(
        default=True,
        description="Start the block with a line saying its memories are recalled facts, not instructions "
        "(false: exactly the article's format).",
    )
    max_block_chars: int = Field(default=500, ge=32, description="Longest memory line in the prompt block.")
    superseded_retention_days: float = Field(
        default=90.0, ge=0, description="`rushmem purge` removes memories superseded longer ago than this."
    )
    near_duplicate_threshold: float = Field(
        default=0.95,
        gt=0,
        le=1.01,
        description="Cosine above which a new memory that states the same fact (same values, names in the same "
        "roles, same polarity) refreshes an existing one (>1 = off).",
    )
    same_attribute_threshold: float = Field(
        # Only bounds which neighbours the text check (rushmem.ingest.facts.updated_value) reads:
        # on all-MiniLM-L6-v2 "works at Umbrella" / "works at Wayne" score 0.41.
        default=0.3,
        gt=0,
        le=1.01,
        description="Cosine above which a new memory that states an existing one's fact with another value in one "
        "slot (an age, a date, a number, a place: 'is 31' -> 'is 32') supersedes it (>1 = off: kept as a second "
        "memory).",
    )

    dense_min_memories: int = Field(
        default=1000,
        ge=2,
        description="`rushmem dense-users` gives a user with at least this many memories a partition of their "
        "own with HNSW and GIN indexes (migration 0013; recall then stays flat for them); below half of it they go "
        "back to exact search.",
    )
    dense_max_text_matches: int = Field(
        default=500,
        ge=1,
        description="A word in more of a dense user's memories than this is left out of their full-text leg "
        "(it would rank most of their rows and tells them apart little).",
    )

    # --- personal data, usage, change events ----------------------------------------
    # NoDecode: pydantic-settings would otherwise try to read "redact" as JSON.
    pii: Annotated[PiiPolicySetting, NoDecode] = Field(
        default=SAFE_DEFAULT_POLICY,
        description="Personal data in memories, at write time (API writes, the SQS message's memories, extracted "
        "facts, import, edits), before embedding: off, redact (typed placeholders such as [EMAIL]) or drop (the "
        "memory is not stored), for every category or per category: `redact,credential=drop,ip_address=off`. "
        "Categories: email, phone, payment_card, bank_account, government_id, credential, ip_address, name, address "
        "(the last two need pii_comprehend). Credentials (access keys, tokens, private keys, passwords) are redacted "
        "unless the setting names `credential` (`credential=off` stores them); the other categories are kept unless "
        "named. The memory's metadata `pii_redacted` counts what was removed, by type.",
    )
    pii_comprehend: bool = Field(
        default=False,
        description="Also find names and street addresses with Amazon Comprehend DetectPiiEntities (AWS, "
        "comprehend:DetectPiiEntities; billed per 100 characters, at least 300 per request).",
    )
    pii_comprehend_language: Literal["en", "es"] = Field(
        default="en", description="Language of the memories sent to Comprehend."
    )
    pii_comprehend_min_score: float = Field(
        default=0.8, ge=0, le=1, description="Comprehend findings below this confidence are kept in the text."
    )
    pii_comprehend_types: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_names)] = Field(
        default=("NAME", "ADDRESS"),
        description="Comprehend entity types acted on (comma-separated); the regex detectors validate the rest.",
    )
    usage_flush_max_pending: int = Field(
        default=100,
        ge=1,
        description="Counts of reads served by a reader endpoint wait in the container and are written in one batch "
        "when this many are waiting, when the oldest is usage_flush_interval_s old, after a write, and at shutdown.",
    )
    usage_flush_interval_s: float = Field(
        default=30.0, gt=0, description="The oldest waiting usage count is written within about this long."
    )
    usage_metering: bool = Field(
        default=True,
        description="Count each user's recalls, conversations, writes and provider calls (tokens, characters) per "
        "day in usage_daily, in the same transaction as the work (`GET /usage`, `rushmem usage`).",
    )
    event_bus: str | None = Field(
        default=None,
        description="EventBridge bus (name or ARN) that receives change events (memory created, refreshed, "
        "superseded, revived, expired, purged, forgotten; user erased) after each commit, through an outbox table. "
        "Unset: no events, nothing written to the outbox.",
    )
    event_source: str = Field(default="agent-memory", description="The events' Source field on the bus.")
    event_content: bool = Field(
        default=False,
        description="Put the memory's text in its change events (off: ids, categories and the kind of change only).",
    )
    erasure_ledger: str | None = Field(
        default=None,
        description="Where every erasure is also recorded, outside the database, so that a restored database "
        "forgets again (`rushmem migrate` re-applies what it lacks): s3://bucket/prefix/ (the stack's ledger "
        "bucket) or a JSON Lines file. Unset: with the embedded server, the data folder's name plus "
        ".erasures.jsonl, beside it; otherwise none (docs/tenant-data.md, Erasure ledger).",
    )
    backup_retention_days: int = Field(
        default=0,
        ge=0,
        le=35,
        description="How many days the database's automated backups (snapshots and point-in-time recovery) keep "
        "what they hold (Aurora's BackupRetentionPeriod): an erasure receipt's backup_horizon is its time plus "
        "this. 0: no automated backups (the receipt says none).",
    )

    # --- operations -----------------------------------------------------------------
    api_docs: bool = Field(
        default=False,
        description="Serve the API's OpenAPI document at GET /openapi.json and its interactive page at GET /docs "
        "(`rushmem serve` turns it on; in AWS the template parameter ApiDocs, behind the same authorizer).",
    )
    web_page: bool = Field(
        default=False,
        description="Serve the page to see and manage a user's memories at GET / (its files under GET /page/; "
        "`rushmem serve` turns it on; in AWS the template parameter WebPage, behind the same authorizer).",
    )
    mcp_tools: Literal["core", "all"] = Field(
        default="core",
        description="The MCP tools /mcp offers: core, the five every model turn pays for (recall, remember, list, "
        "correct, forget), or all of them (`rushmem mcp --tools`; in AWS the template parameter McpTools).",
    )
    log_level: LogLevel = Field(
        default="WARNING", description="Log level of the command line and the local server (stderr)."
    )
    oauth_issuer: str | None = Field(
        default=None,
        description="The authorization server (an OIDC issuer URL) whose tokens the API accepts, named at "
        "GET /.well-known/oauth-protected-resource[/mcp] so MCP hosts find where to sign in (the template sets "
        "the created Cognito user pool or JwtIssuer; `rushmem serve --jwt-issuer` sets it). Unset: 404 there.",
    )
    oauth_authorization_endpoint: str | None = Field(
        default=None,
        description="With oauth_token_endpoint: the issuer's sign-in endpoint, served in RFC 8414 metadata at "
        "GET /.well-known/oauth-authorization-server (advertising S256 PKCE, which Cognito's own metadata omits "
        "and MCP hosts require), and the metadata then names this API as the authorization server. The "
        "template sets the created pool's.",
    )
    oauth_token_endpoint: str | None = Field(
        default=None, description="The issuer's token endpoint, in that metadata (see oauth_authorization_endpoint)."
    )
    oauth_scopes: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_words)] = Field(
        default=(),
        description="Scopes listed in that metadata (scopes_supported), comma-separated; MCP hosts ask for them.",
    )

    @field_validator(
        "database_url",
        "database_reader_url",
        "data_dir",
        "db_reader_host",
        "db_cluster_arn",
        "cells_secret_arn",
        "oauth_issuer",
        "oauth_authorization_endpoint",
        "oauth_token_endpoint",
        "event_bus",
        "erasure_ledger",
        mode="before",
    )
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        # RUSHMEM_DATA_DIR="" would otherwise mean the current directory, which the
        # embedded server would then initialise (and chown) as its data directory; the template
        # passes an empty event bus when none is configured.
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator(*KINDS)
    @classmethod
    def _installed_provider(cls, value: str, info: ValidationInfo) -> str:
        return KINDS[str(info.field_name)].check(value)

    @field_validator("pii_comprehend_types")
    @classmethod
    def _comprehend_types(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        from rushmem.privacy.detectors import COMPREHEND_ENTITY_TYPES

        unknown = sorted(set(value) - set(COMPREHEND_ENTITY_TYPES))
        if unknown:
            raise ValueError(f"unknown Comprehend PII entity types {unknown}")
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("app_db_user")
    @classmethod
    def _app_login_name(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if len(value.encode()) > 63 or value.startswith(RESERVED_ROLE_PREFIXES) or value in GROUP_ROLES:
            raise ValueError(
                f"{value!r} cannot be the application's login role: at most 63 bytes, not a pg_/rds_ role and "
                f"not one of {', '.join(GROUP_ROLES)} (the login role is made a member of agent_memory_app)"
            )
        return value

    @property
    def uses_embedded(self) -> bool:
        return self.database_url is None and not self.db_host and not self.db_cluster_arn

    @property
    def oauth_facade(self) -> bool:
        """This API serves the authorization server metadata for its issuer (both endpoints set)."""
        return bool(self.oauth_issuer and self.oauth_authorization_endpoint and self.oauth_token_endpoint)

    @property
    def uses_data_api(self) -> bool:
        """The RDS Data API, not a connection: a cluster ARN and no URL (which wins, as over db_host)."""
        return self.database_url is None and bool(self.db_cluster_arn)

    @property
    def read_your_writes_s(self) -> float:
        """How long a user's reads stay on the writer after their write (see db_read_your_writes_s)."""
        if self.db_read_your_writes_s is not None:
            return self.db_read_your_writes_s
        return self.db_reader_max_lag_s + self.db_reader_lag_check_s

    def effective_db_role(self) -> str | None:
        """The role the runtime connection takes: the embedded server is ours, so never its superuser."""
        return self.db_role or ("agent_memory_app" if self.uses_embedded else None)

    def resolved_data_dir(self) -> Path:
        return (self.data_dir or default_data_dir()).expanduser()

    def resolved_erasure_ledger(self) -> str | None:
        """erasure_ledger, else beside the embedded server's data folder (not in it: a copy of the
        folder put back must not undo the ledger); None for another database without one."""
        if self.erasure_ledger:
            return self.erasure_ledger
        if not self.uses_embedded:
            return None
        folder = self.resolved_data_dir().resolve()
        return str(folder.parent / f"{folder.name}.erasures.jsonl")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first call."""
    return Settings()
