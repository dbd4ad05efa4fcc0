"""The HTTP API v2 events `agent-memory serve` builds and the answers it reads back
(agent_memory_tools.local.server)."""

from __future__ import annotations

import base64
import json
from http import HTTPStatus
from pathlib import Path

import pytest

from agent_memory_tools.local.server import http_answer, http_api_event, unverified_jwt_claims

EVENTS = Path(__file__).resolve().parents[2] / "events"


def test_http_api_event_has_the_format_2_shape_of_the_events_folder() -> None:
    event = http_api_event(
        "post",
        "/memories?user_id=u1&tag=a&tag=b&empty=",
        [("Host", "localhost:8080"), ("X-Two", "1"), ("x-two", "2"), ("Cookie", "a=1; b=2")],
        b'{"x": 1}',
        claims={"sub": "u1"},
    )
    sample = json.loads((EVENTS / "http-recall-jwt.json").read_text())
    assert set(sample) <= set(event) | {"cookies", "queryStringParameters"}
    assert set(sample["requestContext"]) == set(event["requestContext"])
    assert event["requestContext"]["http"]["method"] == "POST"
    assert event["rawPath"] == "/memories" and event["rawQueryString"] == "user_id=u1&tag=a&tag=b&empty="
    assert event["queryStringParameters"] == {"user_id": "u1", "tag": "a,b", "empty": ""}
    assert event["headers"]["x-two"] == "1,2" and "cookie" not in event["headers"]
    assert event["cookies"] == ["a=1", "b=2"]
    assert event["body"] == '{"x": 1}' and event["isBase64Encoded"] is False
    assert event["requestContext"]["authorizer"]["jwt"]["claims"] == {"sub": "u1"}


def test_binary_bodies_are_base64_and_empty_ones_absent() -> None:
    event = http_api_event("POST", "/recall", [], b"\xff\xfe")
    assert event["isBase64Encoded"] is True and base64.b64decode(event["body"]) == b"\xff\xfe"
    assert "body" not in http_api_event("GET", "/memories", [])
    assert "authorizer" not in http_api_event("GET", "/memories", [])["requestContext"]


def test_answers_follow_api_gateway_rules() -> None:
    assert http_answer({"statusCode": 204, "headers": {"X": "1"}}) == (204, [("X", "1")], b"")
    encoded = {"statusCode": 200, "body": base64.b64encode(b"hi").decode(), "isBase64Encoded": True}
    assert http_answer(encoded)[2] == b"hi"
    assert http_answer({"statusCode": 200, "body": "{}", "cookies": ["a=1"]})[1] == [("Set-Cookie", "a=1")]
    assert http_answer({"just": "json"}) == (HTTPStatus.OK, [("Content-Type", "application/json")], b'{"just": "json"}')


def test_unverified_jwt_claims() -> None:
    payload = base64.urlsafe_b64encode(json.dumps({"sub": "alice", "exp": 1}).encode()).decode().rstrip("=")
    assert unverified_jwt_claims(f"Bearer e30.{payload}.sig") == {"sub": "alice", "exp": "1"}
    assert unverified_jwt_claims(None) is None
    assert unverified_jwt_claims("AWS4-HMAC-SHA256 Credential=...") is None
    for bad in ("Bearer nope", "Bearer a.%%%.c", "Bearer e30.WzFd.sig"):
        with pytest.raises(ValueError):
            unverified_jwt_claims(bad)
