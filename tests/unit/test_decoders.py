"""Every decoder of client input answers a typed refusal (a 4xx naming the field) for anything it
cannot read, never another exception (a 500): pagination cursors, JSON in query parameters,
bodies flagged base64, a token's `sub`, MCP's identity headers. Properties over arbitrary input
(issue 23), and the cases that used to fail."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from rushmem.http.body import base64_body
from rushmem.mcp.http import caller_identity
from rushmem.service.caller import Caller, token_user_id
from rushmem.service.pages import decode_cursor
from rushmem_contract import operations as ops
from rushmem_contract.errors import AgentMemoryError, Forbidden, InvalidInput
from rushmem_contract.kinds import error_kind
from rushmem_contract.models import MAX_ID_CHARS, UserId

_user_id: TypeAdapter[str] = TypeAdapter(UserId)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def refused_4xx(exc: AgentMemoryError) -> None:
    assert 400 <= error_kind(exc).status < 500, exc


# ---- the pagination cursor ----------------------------------------------------------------


@pytest.mark.parametrize(
    "inside",
    [
        [1, 2],
        [None, "x"],
        {"created_at": "2026-01-01T00:00:00Z", "id": "x"},
        ["2026-01-01T00:00:00Z", 5],
        ["2026-01-01T00:00:00Z", ["00000000-0000-0000-0000-000000000000"]],
        [["2026-01-01"], "00000000-0000-0000-0000-000000000000"],
        ["0001-01-01T00:00:00+14:00", "00000000-0000-0000-0000-000000000000"],  # before year 1 in UTC
        "ab",
        7,
    ],
)
def test_a_cursor_with_the_wrong_types_inside_is_refused_naming_the_cursor(inside: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        decode_cursor(b64(json.dumps(inside).encode()))
    assert refused.value.field == "cursor"


def test_a_cursor_nested_past_the_parser_is_refused() -> None:
    with pytest.raises(InvalidInput):
        decode_cursor(b64(b"[" * 5000 + b"]" * 5000))


@given(st.text(max_size=80) | JSON.map(lambda v: b64(json.dumps(v).encode())))
def test_property_any_cursor_decodes_or_is_refused_naming_the_cursor(cursor: str) -> None:
    try:
        created_at, _ = decode_cursor(cursor)
    except InvalidInput as exc:
        field = exc.field
    else:
        assert created_at.tzinfo is not None
        return
    assert field == "cursor"


# ---- JSON in a query parameter (GET /memories?metadata=...) --------------------------------


def listed(query: dict[str, str | None]) -> Any:
    """GET /memories' request, read from its query string as the route reads it."""
    return ops.LIST.from_http({}, {k: v for k, v in query.items() if v is not None}, None)


@pytest.mark.parametrize("raw", ["[" * 1500 + "]" * 1500, '{"a": ' * 1200 + "1" + "}" * 1200, '{"a": NaN}', "[1, 2]"])
def test_deeply_nested_or_odd_metadata_in_the_query_is_refused_naming_it(raw: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        listed({"user_id": "u1", "metadata": raw})
    assert refused.value.field == "filters.metadata"


@given(st.text(max_size=60) | JSON.map(json.dumps), st.none() | st.text(max_size=20))
def test_property_any_filter_parameters_parse_or_are_refused_naming_one(metadata: str, categories: str | None) -> None:
    try:
        listed({"user_id": "u1", "categories": categories, "metadata": metadata})
    except InvalidInput as exc:
        field = exc.field
    else:
        return
    assert field is not None and field.startswith(("filters.metadata", "filters.categories")), field


# ---- a body flagged base64 ----------------------------------------------------------------


@pytest.mark.parametrize("body", ["not base64!", "abc", "ab=c", "\u00e9t\u00e9"])
def test_a_body_flagged_base64_that_is_not_is_refused(body: str) -> None:
    with pytest.raises(InvalidInput):
        base64_body(body)


@given(st.text(max_size=60) | st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()))
def test_property_any_body_flagged_base64_decodes_or_is_refused(body: str) -> None:
    try:
        raw = base64_body(body)
    except InvalidInput as exc:
        refused_4xx(exc)
    else:
        assert base64.b64encode(raw).decode() == body


# ---- a token's sub -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sub",
    ["x" * (MAX_ID_CHARS + 1), " alice", "alice ", "\talice", "al\x00ice", "al\u200bice", "al\ud800ice", "", 42, None],
    ids=[
        "too-long",
        "leading-space",
        "trailing-space",
        "tab",
        "nul",
        "zero-width",
        "surrogate",
        "empty",
        "int",
        "none",
    ],
)
def test_a_sub_that_breaks_the_user_id_rules_is_refused_naming_the_claim(sub: object) -> None:
    with pytest.raises(Forbidden) as refused:
        Caller.for_request({"sub": sub, "iss": "https://issuer.example"})
    assert "'sub'" in str(refused.value)
    assert error_kind(refused.value).status == 403


@given(st.text(max_size=MAX_ID_CHARS + 20))
def test_property_a_sub_is_taken_exactly_as_a_user_id_names_it_or_refused(sub: str) -> None:
    """Whatever a token may act as, a user_id naming the same user is accepted as that user: so an
    identity that can write can read and erase (DELETE /memories?user_id=<sub>)."""
    try:
        user = token_user_id(sub)
    except Forbidden:
        return
    assert user == sub
    assert _user_id.validate_python(sub) == sub  # a user_id query parameter names the same user
    assert Caller.for_request({"sub": sub}).user_for(ops.GET, sub) == sub


# ---- MCP's identity headers ----------------------------------------------------------------


@settings(max_examples=200)
@given(
    st.dictionaries(st.sampled_from(["x-memory-user", "x-memory-project", "x-other"]), st.text(max_size=300)),
    st.none() | st.fixed_dictionaries({"sub": st.text(max_size=40)}),
)
def test_property_any_identity_headers_give_an_identity_or_a_4xx(headers: dict[str, str], claims: Any) -> None:
    try:
        identity = caller_identity(claims, headers)
    except AgentMemoryError as exc:
        refused_4xx(exc)
    else:
        assert identity.user_id and "\x00" not in identity.user_id


# ---- `rushmem serve --unverified-jwt`'s reading of a bearer token ----------------------


@given(st.text(max_size=60) | JSON.map(lambda v: "Bearer e30." + b64(json.dumps(v).encode()) + ".sig"))
def test_property_any_bearer_token_is_read_or_refused_as_not_a_jwt(authorization: str) -> None:
    from rushmem_tools.local.server import unverified_jwt_claims

    try:
        claims = unverified_jwt_claims(authorization)
    except ValueError:
        return
    assert claims is None or all(isinstance(v, str) for v in claims.values())


def test_a_bearer_token_nested_past_the_parser_is_refused() -> None:
    from rushmem_tools.local.server import unverified_jwt_claims

    with pytest.raises(ValueError, match="nested"):
        unverified_jwt_claims("Bearer e30." + b64(b"[" * 5000 + b"]" * 5000) + ".sig")
