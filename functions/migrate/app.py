"""MigrateFunction: applies rushmem's schema migrations on every deploy, or when invoked.

Before migrating it checks each configured Bedrock model's lifecycle (GetFoundationModel): a
model past its end of life or not offered in the region fails the deploy with the model's id and
what to set instead; a LEGACY model passes with a warning naming its end-of-life date.

Two kinds of event:
- a CloudFormation custom-resource request (template.yaml's SchemaMigration): Create and Update
  run ``Memory.migrate()`` (idempotent, advisory-locked) and Delete does nothing, because
  deleting the stack must never delete anyone's memories. The answer goes to the pre-signed
  ResponseURL; a request that is never answered keeps the stack waiting until ServiceTimeout,
  so every outcome, including an unexpected exception or the function's own timeout, is answered.
- ``{"task": "dense-users"}`` (template.yaml's hourly schedule): give users with many memories
  their own indexes (``rushmem dense-users``; it needs the owner, whose credentials this
  function has) and return what it did;
- ``{"task": "consolidate"}`` (the same schedule): merge the duplicates that slipped in
  (``rushmem consolidate``), bounded by the invocation's time and going on where the last
  run stopped;
- anything else (``aws lambda invoke``, ``rushmem invoke MigrateFunction``): migrate and
  return what was applied.

With cells (RUSHMEM_CELLS_SECRET_ARN: the stack's CellsOwnerSecretArn), each runs on every
cell, the home cell first: a cell that cannot be migrated fails the deploy with its name (the
cells are one deployment: a function must not meet a cell without its schema); a cell whose
hourly task fails does not keep the others from theirs, and the run then fails naming it.

Embedder settings and the request functions' login role come from the custom resource's
properties when present (else the environment), so a rollback after a refused embedder change
migrates with the old embedder and succeeds, and a changed AppDatabaseUser re-runs it. After
migrating, as the owner, it creates that login role when missing (see Memory.migrate).

The module imports only the standard library at load time: if the layer was built for the
wrong architecture, the failure is reported to CloudFormation instead of killing the container
before it can answer.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import platform
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

PHYSICAL_RESOURCE_ID = "agent-memory-schema"
LAYER_MARKER = "rushmem_layer.json"
RESPONSE_TIMEOUT_S = 20
# Answer CloudFormation this long before Lambda would kill the invocation.
TIMEOUT_MARGIN_S = 15
# A fresh RDS Proxy or a resuming Aurora Serverless cluster can refuse connections for minutes.
RETRY_DELAY_S = 10
MAX_REASON_CHARS = 1000
SETTING_PROPERTIES = {
    "EmbeddingProvider": "embedding_provider",
    "EmbeddingModel": "embedding_model",
    "EmbeddingDimensions": "embedding_dimensions",
    # The request functions' login role, made (or checked) after migrating.
    "AppDatabaseUser": "app_db_user",
    "AppDatabaseSecretArn": "app_db_secret_arn",
    "AppDatabaseIamAuth": "app_db_iam_auth",
    # The Bedrock models whose lifecycle every run checks.
    "LlmProvider": "llm_provider",
    "LlmModel": "llm_model",
    "RerankProvider": "rerank_provider",
    "RerankModel": "rerank_model",
    # The cells (their owners' URLs) migrated with the home database: another secret re-runs it.
    "CellsOwnerSecretArn": "cells_secret_arn",
}

# Standard logging rather than Powertools: this module must work before the layer is trusted.
logger = logging.getLogger("rushmem.migrate")
logger.setLevel(logging.INFO)


class LayerMismatch(RuntimeError):
    """The layer's wheels were built for another CPU or Python than this function runs."""


class RetiredModel(RuntimeError):
    """A configured Bedrock model is past its end of life or not offered in the region."""


class CellFailed(RuntimeError):
    """A cell (with RUSHMEM_CELLS_SECRET_ARN) could not be migrated, or its hourly task failed."""


def check_models(service: Any, client: Any = None) -> list[str]:
    """Each configured Bedrock model's lifecycle: the warnings (LEGACY, or the check could not run),
    or :class:`RetiredModel` naming every model past its end of life or missing and what to set.

    The control plane may be out of reach (a VPC with only a bedrock-runtime endpoint): the deploy
    then goes on with a warning rather than failing on a question it could not ask."""
    try:
        checks = service.admin.bedrock_models(client)
    except Exception as exc:  # an unreachable or forbidden control plane must not fail the deploy
        warning = f"could not check the Bedrock models' lifecycle ({describe(exc)})"
        logger.warning("%s", warning)
        return [warning]
    failed = [c.message() for c in checks if not c.ok]
    if failed:
        raise RetiredModel("; ".join(failed))
    warnings = [c.message() for c in checks if c.warning]
    for check in checks:
        (logger.warning if check.warning else logger.info)("bedrock model: %s", check.message())
    return warnings


def package_root() -> Path:
    """The folder holding the rushmem package: /opt/python in Lambda."""
    spec = importlib.util.find_spec("rushmem")
    if spec is None or spec.origin is None:
        raise LayerMismatch("the rushmem package is missing: is MemoryLayer attached to this function?")
    return Path(spec.origin).parent.parent


def check_layer() -> None:
    """Fail clearly when MemoryLayer was built for another architecture than the functions use.

    `sam build` cannot tell the layer's Makefile the template's Architecture parameter, so the
    two can disagree; compiled wheels (psycopg, numpy, pydantic-core) would then fail to import.
    """
    marker = package_root() / LAYER_MARKER
    if not marker.exists():  # running from the repository (rushmem invoke), not from a built layer
        return
    built = json.loads(marker.read_text(encoding="utf-8"))
    machine = platform.machine()
    if built.get("machine") != machine:
        raise LayerMismatch(
            f"MemoryLayer was built for {built.get('architecture')} but this function runs on {machine}: "
            f"rebuild with `ARCHITECTURE=<the Architecture parameter> sam build`"
        )


def migrate(
    properties: dict[str, Any] | None = None, deadline: float | None = None, bedrock_client: Any = None
) -> dict[str, Any]:
    """Check the Bedrock models' lifecycle, then apply pending migrations; retry while the database
    is unreachable, until ``deadline``."""
    check_layer()
    from rushmem.config import Settings
    from rushmem.service import Memory
    from rushmem_contract.errors import DatabaseUnavailable

    overrides = {
        field: str(properties[prop])
        for prop, field in SETTING_PROPERTIES.items()
        if properties and str(properties.get(prop, "")).strip()
    }
    service = Memory(Settings(**overrides))  # type: ignore[arg-type]  # pydantic parses the strings
    try:
        model_warnings = check_models(service, bedrock_client)
        migrated = {}
        for name, admin in service.cell_admins().items():
            try:
                migrated[name] = _migrate_until(admin, deadline, DatabaseUnavailable)
            except Exception as exc:
                if not service.cells.configured:
                    raise
                raise CellFailed(f"cell {name!r}: {describe(exc)}") from exc
        home = migrated[service.cells.home]
        result = {
            "applied": home.applied,
            "embedder": service.admin.embedder.fingerprint,
            "app_login": home.app_login.summary() if home.app_login else None,
            "model_warnings": model_warnings,
            # After a restore: the erasures the ledger held and a database lacked, done again.
            "erasures_reapplied": [e for m in migrated.values() for e in m.erasures_reapplied],
        }
        if service.cells.configured:
            result["cells"] = {name: m.applied for name, m in migrated.items()}
    finally:
        service.close()
    logger.info("migrated: %s", json.dumps(result))
    return result


def _migrate_until(admin: Any, deadline: float | None, unavailable: type[Exception]) -> Any:
    """One database migrated, retried while it is unreachable, until ``deadline``."""
    while True:
        try:
            return admin.migrate()
        except unavailable as exc:
            if deadline is None or time.monotonic() + RETRY_DELAY_S >= deadline:
                raise
            logger.warning("database unavailable, retrying in %ss: %s", RETRY_DELAY_S, exc)
            time.sleep(RETRY_DELAY_S)


DENSE_USERS_TASK = "dense-users"
CONSOLIDATE_TASK = "consolidate"


def _scheduled(context: Any, run: Callable[[Any, float], Any], dump: Callable[[Any], dict[str, Any]]) -> Any:
    """A scheduled maintenance run on a fresh service, given half the invocation's remaining time:
    what it leaves undone (an index build cut off, a user not started) the next run takes up. With
    cells, on each cell in turn, each given its share of the time left; the answer is then
    ``{"cells": {name: report}}``."""
    check_layer()
    from rushmem.config import Settings
    from rushmem.service import Memory

    remaining_s = context.get_remaining_time_in_millis() / 1000 if context is not None else 900.0
    deadline = time.monotonic() + max(1.0, remaining_s / 2)
    service = Memory(Settings())
    reports: dict[str, Any] = {}
    failed: dict[str, str] = {}
    try:
        admins = service.cell_admins()
        for left, (name, admin) in zip(range(len(admins), 0, -1), admins.items(), strict=True):
            seconds = max(1.0, (deadline - time.monotonic()) / left)
            if not service.cells.configured:
                reports[name] = run(admin, seconds)
                continue
            try:  # one cell down must not stop the others' maintenance
                reports[name] = run(admin, seconds)
            except Exception as exc:
                logger.exception("cell %r: the scheduled task failed", name)
                failed[name] = describe(exc)
    finally:
        service.close()
    for name, report in reports.items():
        logger.info("%s%s", f"cell {name!r}: " if name else "", report.summary())
    if failed:
        raise CellFailed("; ".join(f"cell {name!r}: {reason}" for name, reason in failed.items()))
    if not service.cells.configured:
        return dump(reports[""])
    return {"cells": {name: dump(report) for name, report in reports.items()}}


def refresh_dense_users(context: Any) -> dict[str, Any]:
    """The scheduled dense-users run: no new index build starts after its time is up."""
    return _scheduled(  # type: ignore[no-any-return]
        context, lambda admin, seconds: admin.refresh_dense_users(max_seconds=seconds), lambda r: r.model_dump()
    )


def consolidate(context: Any) -> dict[str, Any]:
    """The scheduled consolidation: no user is started after its time is up (the checkpoint keeps
    the place)."""
    return _scheduled(  # type: ignore[no-any-return]
        context, lambda admin, seconds: admin.consolidate(max_seconds=seconds), lambda r: r.model_dump(mode="json")
    )


class Responder:
    """Sends exactly one answer to CloudFormation's pre-signed ResponseURL."""

    def __init__(self, event: dict[str, Any]) -> None:
        self.event = event
        self.physical_id = str(event.get("PhysicalResourceId") or PHYSICAL_RESOURCE_ID)
        self.body: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def send(self, status: str, reason: str, data: dict[str, str] | None = None) -> dict[str, Any]:
        with self._lock:
            if self.body is not None:  # already answered (e.g. by the timeout watchdog)
                return self.body
            self.body = {
                "Status": status,
                "Reason": reason[:MAX_REASON_CHARS],
                "PhysicalResourceId": self.physical_id,
                "StackId": self.event.get("StackId"),
                "RequestId": self.event.get("RequestId"),
                "LogicalResourceId": self.event.get("LogicalResourceId"),
                "NoEcho": False,
                "Data": data or {},
            }
            put(str(self.event["ResponseURL"]), self.body)
            return self.body


def put(url: str, body: dict[str, Any]) -> None:
    """PUT the answer to the pre-signed S3 URL (the URL is signed without a Content-Type)."""
    if urllib.parse.urlsplit(url).scheme not in {"https", "http"}:
        raise ValueError(f"ResponseURL must be an http(s) URL, not {url[:40]!r}")
    payload = json.dumps(body).encode()
    request = urllib.request.Request(  # noqa: S310 - scheme checked above
        url, data=payload, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(payload))}
    )
    try:
        with urllib.request.urlopen(request, timeout=RESPONSE_TIMEOUT_S) as response:  # noqa: S310
            logger.info("answered CloudFormation: %s (HTTP %s)", body["Status"], response.status)
    except OSError as exc:
        # Nothing else can reach CloudFormation; the stack fails when ServiceTimeout expires.
        logger.error(
            "could not deliver the answer to CloudFormation (%s); the subnets need a route to S3 "
            "(NAT gateway or an S3 gateway endpoint)",
            exc,
        )


def describe(exc: BaseException) -> str:
    """'Kind: message' with the first public class name (a private subclass says nothing)."""
    kind = next(cls.__name__ for cls in type(exc).__mro__ if not cls.__name__.startswith("_"))
    return f"{kind}: {exc}"


def _applied(names: list[str]) -> str:
    """A run's migrations as the stack's events show them: a fresh database's whole list (24 names,
    twice with a second cell) would push what follows, a model's retirement warning too, past the
    Reason's cut; ``Data.Applied`` keeps the full list."""
    if not names:
        return "none pending"
    if len(names) <= 3:
        return ", ".join(names)
    return f"{names[0]} ... {names[-1]} ({len(names)})"


def handle_custom_resource(event: dict[str, Any], context: Any) -> dict[str, Any]:
    responder = Responder(event)
    remaining_s = context.get_remaining_time_in_millis() / 1000 if context is not None else 900.0
    deadline = time.monotonic() + remaining_s - TIMEOUT_MARGIN_S
    watchdog = threading.Timer(
        max(1.0, remaining_s - TIMEOUT_MARGIN_S / 3),
        responder.send,
        ("FAILED", "MigrateFunction ran out of time: is the database reachable from its subnets?"),
    )
    watchdog.daemon = True
    watchdog.start()
    request = event.get("RequestType")
    try:
        if request == "Delete":
            return responder.send("SUCCESS", "nothing to do: deleting the stack keeps the database and its memories")
        if request not in {"Create", "Update"}:
            return responder.send("FAILED", f"unknown RequestType {request!r}")
        result = migrate(event.get("ResourceProperties") or {}, deadline=deadline)
        applied = _applied(result["applied"])
        login = f"; application login role {result['app_login']}" if result["app_login"] else ""
        cells = result.get("cells", {})
        others = "".join(f"; cell {n!r}: {_applied(a)}" for n, a in list(cells.items())[1:])
        warnings = "".join(f"; WARNING {w}" for w in result["model_warnings"])
        redone = result.get("erasures_reapplied") or []
        erasures = f"; {len(redone)} erasure(s) re-applied from the ledger" if redone else ""
        data = {
            "Applied": ",".join(result["applied"]),
            "Embedder": str(result["embedder"]),
            "AppLogin": result["app_login"] or "",
        }
        if cells:
            data["Cells"] = ",".join(cells)
        return responder.send("SUCCESS", f"migrations applied: {applied}{login}{others}{erasures}{warnings}", data)
    except Exception as exc:  # every failure must reach CloudFormation, whatever it is
        logger.exception("migration failed")
        return responder.send("FAILED", describe(exc))
    finally:
        watchdog.cancel()


def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    if "RequestType" in event and "ResponseURL" in event:
        return handle_custom_resource(event, context)
    if event.get("task") == DENSE_USERS_TASK:
        return refresh_dense_users(context)
    if event.get("task") == CONSOLIDATE_TASK:
        return consolidate(context)
    return migrate()
