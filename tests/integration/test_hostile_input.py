"""Hostile input through RecallFunction (events/ files, the real embedded PostgreSQL): valid JSON of
the right shape that used to answer 500 or be stored when it should not. Each case here failed
before its fix (issue 16); whatever is refused is a 4xx naming the field, never a 5xx."""

from __future__ import annotations

import base64
import json
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.recall import body_of, invoke, with_body, with_request

USER = "user-hostile"


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"k": value}
    return value


def add(body: dict[str, Any] | str) -> dict[str, Any]:
    return invoke(with_body("http-memories-add.json", body))


def recall(body: dict[str, Any] | str) -> dict[str, Any]:
    return invoke(with_body("http-recall-iam.json", body))


def refused(result: dict[str, Any], field: str | None, status: int = 400) -> dict[str, Any]:
    assert result["statusCode"] == status, result
    body = body_of(result)
    assert body["code"] in ("invalid_input", "input_too_large"), body
    if field is not None:
        assert body.get("field") == field, body
    return dict(body)


# ---- (1) a date the calendar does not have ------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "What did I do in March 0000?",  # a month of year 0
        "What happened on 31 February 2023?",
        "notes from 0000-01-01",
        "plans for December 9999",  # the month's end is past datetime.max
        "what happened on 31 December 9999?",
    ],
)
def test_a_query_naming_an_impossible_date_is_recalled_not_500(lambda_env: str, query: str) -> None:
    add({"user_id": USER, "memories": [{"content": "Went to the dentist in March"}]})
    result = recall({"user_id": USER, "query": query})
    assert result["statusCode"] == 200, result


@pytest.mark.parametrize("now", ["0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"])
@pytest.mark.parametrize("query", ["what did I say yesterday?", "anything from last year", "in December 9999"])
def test_recall_as_of_the_ends_of_the_calendar_answers(lambda_env: str, now: str, query: str) -> None:
    add({"user_id": USER, "memories": [{"content": "Said something", "created_at": "0001-01-01T00:00:00Z"}]})
    result = recall({"user_id": USER, "query": query, "now": now})
    assert result["statusCode"] == 200, result


# ---- (2) bodies that are not text ---------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        '{"user_id": "user-hostile", "query": "\\ud800"}',  # a lone high surrogate
        '{"user_id": "user-hostile", "query": "tea \\udfff"}',  # a lone low surrogate
        '{"user_id": "user-hostile", "messages": [{"role": "user", "content": "\\ud800"}]}',
    ],
)
def test_a_lone_surrogate_in_a_recall_body_is_400(lambda_env: str, raw: str) -> None:
    add({"user_id": USER, "memories": [{"content": "Likes tea"}]})
    body = refused(recall(raw), None)
    assert "surrogate" in body["message"]


@pytest.mark.parametrize(
    "memory",
    [
        '{"content": "Likes tea", "metadata": {"note": "\\ud800"}}',
        '{"content": "Likes tea", "metadata": {"\\udc00": 1}}',
        '{"content": "Likes tea", "metadata": {"list": ["ok", "\\ud83d"]}}',
    ],
)
def test_a_lone_surrogate_in_an_added_memory_is_400(lambda_env: str, memory: str) -> None:
    body = refused(add('{"user_id": "user-hostile", "memories": [' + memory + "]}"), None)
    assert "surrogate" in body["message"]


def test_a_surrogate_pair_is_one_character_and_welcome(lambda_env: str) -> None:
    stored = add('{"user_id": "user-hostile", "memories": [{"content": "Loves \\ud83d\\ude00 emoji"}]}')
    assert stored["statusCode"] == 201, stored
    found = body_of(recall({"user_id": USER, "query": "emoji"}))
    assert found["memories"][0]["content"] == "Loves \U0001f600 emoji"


@pytest.mark.parametrize(
    "raw",
    [
        '{"user_id": "user-hostile", "memories": [{"content": "x", "metadata": {"n": NaN}}]}',
        '{"user_id": "user-hostile", "memories": [{"content": "x", "metadata": {"n": Infinity}}]}',
        '{"user_id": "user-hostile", "memories": [{"content": "x", "metadata": {"n": 1e999}}]}',
        '{"user_id": "user-hostile", "memories": [{"content": "x", "metadata": {"n": ' + "9" * 5000 + "}}]}",
        '{"user_id": "user-hostile", "memories": ' + "[" * 5000 + "]" * 5000 + "}",
    ],
    ids=["nan", "infinity", "overflowing-float", "5000-digit-int", "5000-deep-array"],
)
def test_json_that_python_reads_but_postgresql_or_the_limits_refuse_is_400(lambda_env: str, raw: str) -> None:
    refused(add(raw), None)


def test_a_body_that_is_not_utf8_is_400(lambda_env: str) -> None:
    evt = with_body("http-recall-iam.json", "")
    evt["body"] = base64.b64encode(b'{"user_id": "u", "query": "caf\xe9"}').decode()
    evt["isBase64Encoded"] = True
    body = refused(invoke(evt), None)
    assert "UTF-8" in body["message"]


# ---- (3) content with nothing to see ------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        "\u200b\u2060\ufe0f",  # zero-width space, word joiner, a variation selector
        "\u200e\u200f\u202e",  # LRM, RLM, RTL override
        "\u00ad\ufeff",  # soft hyphen, BOM
        "\u0301\u0308",  # combining marks with nothing to sit on
        "\u3164 \uffa0",  # Hangul fillers: letters by category, blank on screen
        "\U000e0041\U000e0042",  # tag characters
        "\u2800",  # braille blank
    ],
)
def test_content_with_no_visible_character_is_refused(lambda_env: str, content: str) -> None:
    body = refused(add({"user_id": USER, "memories": [{"content": content}]}), "memories[0].content")
    assert "visible" in body["message"]
    assert (
        body_of(invoke(with_request("http-memories-list.json", "GET", "/memories", {"user_id": USER})))["memories"]
        == []
    )


@pytest.mark.parametrize("content", ["\u6f22\u5b57", "\U0001f600", "1\ufe0f\u20e3", "!!!", "\u05e9\u05dc\u05d5\u05dd"])
def test_content_that_shows_something_is_kept(lambda_env: str, content: str) -> None:
    assert add({"user_id": USER, "memories": [{"content": content}]})["statusCode"] == 201


# ---- (4) metadata nested too deep ---------------------------------------------------------


@pytest.mark.parametrize("depth", [9, 33, 300, 900])
def test_deeply_nested_metadata_is_refused_and_never_denies_recall(lambda_env: str, depth: int) -> None:
    add({"user_id": USER, "memories": [{"content": "Prefers green tea"}]})
    result = add({"user_id": USER, "memories": [{"content": "Prefers black tea", "metadata": nested(depth)}]})
    body = refused(result, "memories[0].metadata", 400 if depth > 32 else 413)
    assert "deep" in body["message"]
    found = recall({"user_id": USER, "query": "tea"})
    assert found["statusCode"] == 200, found
    assert [m["content"] for m in body_of(found)["memories"]] == ["Prefers green tea"]


def test_a_deep_memory_stored_before_the_limit_still_lets_its_user_recall_and_list(lambda_env: str) -> None:
    """Rows written before the bound existed: reading them must not fail (the API answers them
    with the too-deep part cut), or one old memory would deny its user recall."""
    add({"user_id": USER, "memories": [{"content": "Prefers black tea"}]})
    with psycopg.connect(lambda_env, autocommit=True) as conn:
        conn.execute("UPDATE user_memories SET metadata = %s::jsonb", [json.dumps(nested(400))])
    found = recall({"user_id": USER, "query": "tea"})
    assert found["statusCode"] == 200, found
    [memory] = body_of(found)["memories"]
    assert memory["content"] == "Prefers black tea"
    listed = invoke(with_request("http-memories-list.json", "GET", "/memories", {"user_id": USER}))
    assert listed["statusCode"] == 200, listed


def test_patch_holds_metadata_to_the_same_bounds(lambda_env: str) -> None:
    (memory_id,) = body_of(add({"user_id": USER, "memories": [{"content": "Prefers tea"}]}))["ids"]
    evt = with_request("http-memory-get.json", "PATCH", f"/memories/{memory_id}", {"user_id": USER})
    evt["headers"]["content-type"] = "application/json"  # as a client sends it (the GET event has none)
    cases = ((nested(9), "metadata", 413), (nested(40), "metadata", 400), ({"n": float("nan")}, "metadata.n", 400))
    for metadata, field, status in cases:
        refused(invoke(with_body(evt, json.dumps({"metadata": metadata}))), field, status)
    result = invoke(with_body(evt, '{"content": "\\u200b\\u200d"}'))
    refused(result, "content")


# ---- (5) decoders of client input: a 4xx naming the field, never a 5xx (issue 23) ------------


def b64(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def listing(query: dict[str, str], path: str = "/memories") -> dict[str, Any]:
    return invoke(with_request("http-memories-list.json", "GET", path, {"user_id": USER, **query}))


@pytest.mark.parametrize(
    ("cursor", "status"),
    [
        (b64(["2026-01-01T00:00:00+00:00", 5]), 400),  # an id that is a number
        (b64(["2026-01-01T00:00:00+00:00", ["00000000-0000-0000-0000-000000000000"]]), 400),
        (b64([{"y": 2026}, "00000000-0000-0000-0000-000000000000"]), 400),
        (b64(["0001-01-01T00:00:00+14:00", "00000000-0000-0000-0000-000000000000"]), 400),  # before year 1 in UTC
        (b64(nested(40)), 400),
        # Past the cursor's length ceiling (512): refused as too large before it is decoded.
        (b64(nested(300)), 413),
        (base64.urlsafe_b64encode(b"[" * 380).decode(), 400),
    ],
    ids=["int-id", "list-id", "object-date", "before-year-1", "nested-object", "nested-object-long", "nested-arrays"],
)
@pytest.mark.parametrize("path", ["/memories", "/memories/export"])
def test_a_cursor_with_the_wrong_types_is_400_naming_the_cursor(
    lambda_env: str, cursor: str, status: int, path: str
) -> None:
    add({"user_id": USER, "memories": [{"content": "Likes tea"}]})
    refused(listing({"cursor": cursor}, path), "cursor", status)


@pytest.mark.parametrize(
    ("metadata", "status", "field"),
    [
        ("[" * 1000 + "]" * 1000, 400, "filters.metadata"),
        ('{"a":' * 300 + "1" + "}" * 300, 400, "filters.metadata"),
        ('{"a": ' + "[" * 40 + "]" * 40 + "}", 400, "filters.metadata"),
        # Past the parameter's length ceiling (2,048): refused as too large before it is parsed,
        # named as the request has it, as every other refusal of a filter is.
        ('{"a":' * 600 + "1" + "}" * 600, 413, "filters.metadata"),
    ],
    ids=["arrays-1000", "object-300", "arrays-40-in-object", "object-600-too-long"],
)
def test_deeply_nested_json_in_the_metadata_parameter_is_400_naming_it(
    lambda_env: str, metadata: str, status: int, field: str
) -> None:
    # The metadata parameter is the request's filters.metadata (GET /memories' filters).
    refused(listing({"metadata": metadata}), field, status)


@pytest.mark.parametrize("route", ["http-memories-add.json", "http-recall-iam.json", "http-mcp-recall.json"])
@pytest.mark.parametrize("body", ["not base64!", "eyJ1c2VyX2lkIjog", "e30=e30="])
def test_a_body_flagged_base64_that_is_not_is_400(lambda_env: str, route: str, body: str) -> None:
    evt = with_body(route, "")
    evt["body"], evt["isBase64Encoded"] = body, True
    result = invoke(evt)
    assert result["statusCode"] == 400, result


# ---- (6) identity at the door ------------------------------------------------------------------

BAD_SUBS = {
    "too-long": "u" * 257,
    "leading-space": " user-hostile",
    "trailing-space": "user-hostile ",
    "nul": "user-\x00hostile",
    "control": "user-\x07hostile",
    "zero-width": "user-\u200bhostile",
}


def _as_token(evt: dict[str, Any], sub: str) -> dict[str, Any]:
    from tests.support.recall import as_jwt

    return as_jwt(evt, sub)


@pytest.mark.parametrize("sub", list(BAD_SUBS.values()), ids=list(BAD_SUBS))
def test_a_sub_that_breaks_the_user_id_rules_is_refused_at_every_door(lambda_env: str, sub: str) -> None:
    writes = [
        with_body("http-memories-add.json", {"memories": [{"content": "Likes tea"}]}),
        with_body("http-recall-iam.json", {"query": "tea"}),
        with_request("http-memories-list.json", "GET", "/memories"),
        with_request("http-memories-list.json", "GET", "/usage"),
        with_body("http-mcp-recall.json", json.loads(event_body("http-mcp-recall.json"))),
    ]
    for evt in writes:
        if "x-memory-user" in evt["headers"]:
            del evt["headers"]["x-memory-user"]
        result = invoke(_as_token(evt, sub))
        assert result["statusCode"] == 403, (evt["rawPath"], result)
        body = body_of(result)
        message = body["error"]["message"] if "jsonrpc" in body else body["message"]
        assert "'sub'" in message, body
    with psycopg.connect(lambda_env) as conn:
        assert conn.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)


def event_body(name: str) -> str:
    from tests.support.recall import event

    return str(event(name)["body"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=40)
    | st.sampled_from([*BAD_SUBS.values(), "u" * 256, "\u00e9l\u00e8ve", "a b"])
)
def test_property_every_identity_that_can_write_can_erase(lambda_env: str, sub: str) -> None:
    """Through RecallFunction: a token's sub either is refused at the door (403) or can write,
    read and erase everything it wrote (DELETE /memories?user_id=<sub>), leaving nothing behind."""
    added = invoke(_as_token(with_body("http-memories-add.json", {"memories": [{"content": "Likes tea"}]}), sub))
    if added["statusCode"] == 403:
        assert "'sub'" in body_of(added)["message"]
        return
    assert added["statusCode"] == 201, added
    erase = _as_token(with_request("http-memories-delete-all.json", "DELETE", "/memories", {"user_id": sub}), sub)
    erased = invoke(erase)
    assert erased["statusCode"] == 200, erased
    assert body_of(erased)["deleted"]["memories"] == 1
    with psycopg.connect(lambda_env) as conn:
        assert conn.execute("SELECT count(*) FROM user_memories").fetchone() == (0,)
