"""The HTTP door's pure logic (rushmem.http): the query from chat messages, identity, error
mapping both ways."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rushmem.http import errors, identity, media
from rushmem.service.caller import Caller
from rushmem_client import errors as client_errors
from rushmem_contract import kinds as http_errors
from rushmem_contract import operations as ops
from rushmem_contract import schemas
from rushmem_contract.errors import (
    AgentMemoryError,
    ConfigurationError,
    DatabaseUnavailable,
    Forbidden,
    InputTooLarge,
    InvalidInput,
    NotFound,
    ProviderError,
    SchemaMismatch,
    ServiceUnavailable,
    StatementTimeout,
)


def messages(*pairs: tuple[str, object]) -> list[schemas.RecallMessage]:
    return [schemas.RecallMessage.model_validate({"role": r, "content": c}) for r, c in pairs]


# ---- the query ---------------------------------------------------------------------------


def test_the_query_is_the_latest_user_message_with_text() -> None:
    chat = messages(
        ("system", "You are helpful."),
        ("user", "first question"),
        ("assistant", "an answer"),
        ("user", [{"type": "text", "text": "second"}, {"type": "image_url", "image_url": {}}, {"type": "text"}]),
        ("assistant", "another answer"),
    )
    assert schemas.latest_user_query(chat) == "second"


def test_user_messages_without_text_are_skipped() -> None:
    chat = messages(("user", "  what about pnpm?  "), ("user", [{"type": "image_url"}]), ("user", "   "))
    assert schemas.latest_user_query(chat) == "what about pnpm?"
    assert schemas.latest_user_query(messages(("assistant", "hi"), ("tool", "{}"))) is None
    assert schemas.latest_user_query([]) is None


def test_whole_agent_transcripts_are_accepted() -> None:
    """Tool calls (content null), developer and tool messages: only user text matters."""
    request = schemas.RecallRequest.model_validate(
        {
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": "Deploy the editor"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "t1", "type": "function"}]},
                {"role": "tool", "tool_call_id": "t1", "content": "deployed"},
            ]
        }
    )
    assert request.query_text() == "Deploy the editor"


def test_recall_request_needs_exactly_one_of_query_and_messages() -> None:
    assert schemas.RecallRequest(user_id="u", query="x").query_text() == "x"
    with pytest.raises(InvalidInput) as missing:
        schemas.RecallRequest(user_id="u").query_text()
    assert missing.value.field == "query"
    with pytest.raises(InvalidInput) as both:
        schemas.RecallRequest.model_validate(
            {"query": "x", "messages": [{"role": "user", "content": "y"}]}
        ).query_text()
    assert both.value.field == "messages"
    with pytest.raises(InvalidInput, match="no user message") as no_user:
        schemas.RecallRequest.model_validate({"messages": [{"role": "assistant", "content": "y"}]}).query_text()
    assert no_user.value.field == "messages"


def test_recall_request_rejects_unknown_fields_and_limits_out_of_range() -> None:
    for bad in ({"query": "x", "lmit": 3}, {"query": "x", "limit": 0}, {"query": "x", "limit": 51}):
        with pytest.raises(ValidationError):
            schemas.RecallRequest.model_validate(bad)
    assert schemas.RecallRequest.model_validate({"query": "x", "limit": 50}).limit == 50


# ---- identity ----------------------------------------------------------------------------


def acting_for(claims: dict[str, str] | None, requested: str | None) -> str | None:
    return Caller.for_request(claims).user_for(ops.GET, requested)


def test_a_jwt_user_is_the_sub_claim_and_cannot_act_for_another() -> None:
    assert acting_for({"sub": "alice"}, None) == "alice"
    assert acting_for({"sub": "alice"}, "alice") == "alice"
    with pytest.raises(Forbidden):
        acting_for({"sub": "alice"}, "bob")
    with pytest.raises(Forbidden, match="sub"):
        acting_for({"iss": "x"}, "alice")
    # A row that is not one user's (the users listing) is a trusted caller's only.
    with pytest.raises(Forbidden):
        Caller.for_request({"sub": "alice"}).user_for(ops.USERS, None)


def test_without_claims_the_backend_must_name_the_user() -> None:
    assert acting_for(None, "bob") == "bob"
    # Empty claims are a JWT that names nobody, never a trusted backend free to name any user.
    with pytest.raises(Forbidden):
        acting_for({}, "bob")
    assert identity.jwt_claims({"requestContext": {"authorizer": {"jwt": {"claims": None}}}}) == {}
    assert identity.jwt_claims({"requestContext": {"authorizer": {"iam": {"userArn": "arn"}}}}) is None
    with pytest.raises(InvalidInput) as missing:
        acting_for(None, None)
    assert missing.value.field == "user_id"


# ---- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "status", "leaks"),
    [
        (InvalidInput("limit must be between 1 and 50", field="limit"), 400, None),
        (InputTooLarge("query is 5000 characters", field="query"), 413, None),
        (Forbidden("not yours"), 403, None),
        (NotFound("no memory"), 404, None),
        (DatabaseUnavailable("cannot connect to db.internal:5432/prod"), 503, "db.internal"),
        (StatementTimeout("recall query exceeded statement_timeout"), 503, "statement_timeout"),
        (ProviderError("bedrock", "AccessDenied for role arn:aws:iam::1:role/x"), 502, "arn:aws"),
        (SchemaMismatch("stored dimension 1024, embedder 384"), 500, "1024"),
        (ConfigurationError("AGENT_MEMORY_DB_IAM_AUTH needs AGENT_MEMORY_DB_USER"), 500, "AGENT_MEMORY"),
    ],
)
def test_every_error_type_has_a_status_and_the_client_gets_the_same_type_back(
    error: AgentMemoryError, status: int, leaks: str | None
) -> None:
    kind = http_errors.error_kind(error)
    assert kind.status == status
    message = kind.public_message or str(error)
    if leaks:
        assert leaks not in message  # hosts, settings and ARNs stay in the logs
    body = schemas.ErrorBody(
        code=kind.code, message=message, field=getattr(error, "field", None), request_id="r1"
    ).model_dump(exclude_none=True)
    back = client_errors.error_from_answer(status, body)
    assert type(back) is kind.error and isinstance(error, kind.error)  # SchemaMismatch comes back as its base
    if isinstance(error, InvalidInput):
        assert isinstance(back, InvalidInput) and back.field == error.field and str(back) == str(error)


def test_an_unknown_exception_is_an_internal_error() -> None:
    assert http_errors.error_kind(RuntimeError("boom")).status == 500


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (401, {"message": "Unauthorized"}, Forbidden),
        (403, {"message": "Missing Authentication Token"}, Forbidden),
        (413, {"message": "Request Entity Too Large"}, InputTooLarge),
        (429, {"message": "Too Many Requests"}, ServiceUnavailable),
        (500, {"message": "Internal Server Error"}, ServiceUnavailable),
        (503, {"message": "Service Unavailable"}, ServiceUnavailable),
        (404, {"message": "Not Found"}, ConfigurationError),
        (404, {"code": "route_not_found", "message": "no route"}, ConfigurationError),
        (418, "not json", AgentMemoryError),
    ],
)
def test_answers_of_api_gateway_itself_map_to_typed_errors(status: int, body: object, expected: type) -> None:
    assert type(client_errors.error_from_answer(status, body)) is expected


def test_validation_errors_name_the_field() -> None:
    details = errors.describe_validation_errors(
        [
            {"loc": ("body", "memories", 0, "content"), "msg": "Field required", "type": "missing"},
            {"loc": ("query", "limit"), "msg": "Input should be less than or equal to 500", "type": "less_than_equal"},
            {"loc": ("body",), "msg": "Field required", "type": "missing"},
            {"loc": ("body", 7), "msg": "JSON decode error", "type": "json_invalid", "ctx": {"error": "Expecting ','"}},
        ]
    )
    assert [d.field for d in details] == ["memories[0].content", "limit", None, None]
    assert details[0].message == "memories[0].content: Field required"
    assert details[2].message == "a JSON object is required as the request body"
    assert details[3].message == "the request body is not valid JSON: Expecting ','"


def test_json_content_types() -> None:
    # No content type is no JSON: a browser sends a Blob body or a beacon without one, cross-site.
    assert not media.is_json_content_type(None)
    assert not media.is_json_content_type("")
    assert media.is_json_content_type("application/json; charset=utf-8")
    assert media.is_json_content_type("Application/JSON")
    assert media.is_json_content_type("application/vnd.api+json")
    assert not media.is_json_content_type("application/x-www-form-urlencoded")
    assert not media.is_json_content_type("text/plain")
    assert not media.is_json_content_type("text/plain+json")
    # Which requests must say so: POST, PUT, PATCH, and anything with a body (a bodiless DELETE or GET not).
    assert media.needs_json("post", None) and media.needs_json("PATCH", "") and media.needs_json("DELETE", "{}")
    assert not media.needs_json("DELETE", None) and not media.needs_json("GET", "")
