"""The HTTP API v2 events `rushmem serve` builds and the answers it reads back
(rushmem_tools.local.server)."""

from __future__ import annotations

import base64
import json
from http import HTTPStatus
from pathlib import Path

import pytest

from rushmem_tools.local.server import BrowserGuard, http_answer, http_api_event, unverified_jwt_claims

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


def _refusal(guard: BrowserGuard, headers: dict[str, str], method: str = "GET") -> int | None:
    found = guard.refusal(method, {k.lower(): v for k, v in headers.items()})
    return None if found is None else int(found[0])


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("127.0.0.1:8080", None),
        ("127.0.0.2", None),
        ("localhost:8080", None),
        ("LOCALHOST.", None),
        ("[::1]:8080", None),
        ("[0:0:0:0:0:0:0:1]", None),
        ("attacker.example:8080", 421),  # DNS rebinding: the page's own name
        ("localhost.attacker.example", 421),
        ("127.0.0.1.nip.io", 421),
        ("127.0.0.1@attacker.example", 421),
        ("127.0.0.1:notaport", 421),
        ("", 421),
        ("0.0.0.0", 421),
        ("192.168.1.5", 421),
    ],
)
def test_serve_answers_only_loopback_host_names_by_default(host: str, status: int | None) -> None:
    assert _refusal(BrowserGuard.for_bind("127.0.0.1"), {"Host": host}) == status


def test_the_bound_address_and_allowed_names_are_answered() -> None:
    guard = BrowserGuard.for_bind("192.168.1.5", hosts=["Memory.LAN", "[fe80::1]"])
    assert _refusal(guard, {"Host": "192.168.1.5:8080"}) is None
    assert _refusal(guard, {"Host": "memory.lan"}) is None
    assert _refusal(guard, {"Host": "[fe80:0::1]:80"}) is None
    assert _refusal(guard, {"Host": "other.lan"}) == HTTPStatus.MISDIRECTED_REQUEST
    # Bound to every interface: the printed URL (0.0.0.0) works, a LAN name or address needs --allow-host.
    assert _refusal(BrowserGuard.for_bind("0.0.0.0"), {"Host": "0.0.0.0:8080"}) is None
    assert _refusal(BrowserGuard.for_bind("0.0.0.0"), {"Host": "192.168.1.5"}) == HTTPStatus.MISDIRECTED_REQUEST
    assert _refusal(BrowserGuard.for_bind("0.0.0.0", hosts=["*"]), {"Host": "anything"}) is None


@pytest.mark.parametrize(
    ("headers", "method", "status"),
    [
        ({"Origin": "http://127.0.0.1:8080"}, "POST", None),
        ({"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-origin"}, "POST", None),
        ({"Origin": "http://127.0.0.1:9999"}, "POST", 403),  # another port: another origin
        ({"Origin": "https://127.0.0.1:8080"}, "POST", 403),
        ({"Origin": "http://localhost:8080"}, "POST", 403),  # another name: another origin
        ({"Origin": "null"}, "POST", 403),
        ({"Origin": "http://attacker.example"}, "GET", 403),
        ({"Origin": "https://memory.example.com"}, "POST", None),  # --allow-origin
        ({"Origin": "https://memory.example.com", "Sec-Fetch-Site": "cross-site"}, "POST", None),
        ({"Sec-Fetch-Site": "cross-site"}, "POST", 403),
        ({"Sec-Fetch-Site": "same-site"}, "DELETE", 403),
        ({"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}, "GET", 403),
        ({"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, "GET", None),  # a link followed
        ({"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}, "POST", 403),  # a form posted
        ({"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}, "GET", None),
        ({}, "POST", None),  # no browser: a program sends neither header
    ],
)
def test_serve_refuses_other_origins_and_what_a_browser_marks_cross_site(
    headers: dict[str, str], method: str, status: int | None
) -> None:
    guard = BrowserGuard.for_bind("127.0.0.1", origins=["https://memory.example.com/"])
    assert _refusal(guard, {"Host": "127.0.0.1:8080", **headers}, method) == status
