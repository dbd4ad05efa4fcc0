"""Every function of template.yaml, invoked from its CodeUri and Handler with each of its
events/ files (events/manifest.json), against the embedded PostgreSQL: the same code path as
`rushmem invoke FUNCTION EVENT.json`, and the same files as `sam local invoke -e`.

Generic on purpose: a new event file needs only a manifest entry. Events carrying a
CloudFormation ResponseURL are answered to a local receiver instead, and the answer it got
must be what the handler returned.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from rushmem_tools.local import runtime as lambda_local
from tests.deploy.conftest import REPO, TEMPLATE, CloudFormationReceiver

EVENTS = REPO / "events"
MANIFEST = json.loads((EVENTS / "manifest.json").read_text(encoding="utf-8"))
ENTRIES: list[dict[str, Any]] = MANIFEST["events"]


def _functions() -> list[str]:
    resources = lambda_local.load_template(TEMPLATE)["Resources"]
    return sorted(k for k, v in resources.items() if v.get("Type") == lambda_local.SERVERLESS_FUNCTION)


def test_manifest_entries_name_existing_files_and_functions() -> None:
    functions = set(_functions())
    for entry in ENTRIES:
        assert (EVENTS / entry["file"]).is_file(), f"events/{entry['file']} is in the manifest but missing"
        assert entry["function"] in functions, f"{entry['file']}: {entry['function']} is not in template.yaml"
        assert isinstance(entry.get("expect"), dict) and entry["expect"], f"{entry['file']}: no expectation"


def test_every_event_file_is_in_the_manifest() -> None:
    listed = {entry["file"] for entry in ENTRIES}
    files = {p.name for p in EVENTS.glob("*.json") if p.name != "manifest.json"}
    assert files <= listed, f"event files without a manifest entry: {sorted(files - listed)}"


@pytest.mark.parametrize("function", _functions())
def test_every_function_has_events(function: str) -> None:
    assert any(entry["function"] == function for entry in ENTRIES), f"no events for {function} in events/manifest.json"


def _expectation_met(result: Any, expect: dict[str, Any]) -> bool:
    return isinstance(result, dict) and all(result.get(key) == value for key, value in expect.items())


@pytest.mark.usefixtures("lambda_env")
@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e['function']}:{e['file']}" for e in ENTRIES])
def test_function_answers_its_event_as_the_manifest_says(
    entry: dict[str, Any], cfn_receiver: CloudFormationReceiver
) -> None:
    event = lambda_local.read_event(EVENTS / entry["file"])
    if "ResponseURL" in event:
        event["ResponseURL"] = cfn_receiver.url
    for record in event.get("Records", []):  # the SQS files are real-looking: the checksum matches the body
        assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest(), entry["file"]
    result = lambda_local.invoke(Path(TEMPLATE), entry["function"], event)
    assert _expectation_met(result, entry["expect"]), (
        f"{entry['function']} with events/{entry['file']} returned {json.dumps(result, default=str)[:2000]}, "
        f"expected {entry['expect']}"
    )
    if "ResponseURL" in event:
        assert cfn_receiver.bodies == [result], "the answer CloudFormation got differs from the return value"
    if isinstance(result, dict) and int(result.get("statusCode", 0)) >= 400:
        # An error answer names the request (the logs' correlation id) and never a traceback.
        body = json.loads(result["body"])
        if "jsonrpc" in body:  # /mcp answers JSON-RPC errors; the request id is in error.data
            body = body["error"]["data"]
        assert body["request_id"] == event["requestContext"]["requestId"]
        assert "Traceback" not in result["body"]
