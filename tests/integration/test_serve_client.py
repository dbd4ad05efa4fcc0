"""`rushmem serve` over real HTTP on 127.0.0.1 answers as `rushmem invoke` does, and
MemoryClient (no auth, JWT, SigV4) works against it with typed errors."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from rushmem.http.oauth import PUBLIC_PATHS
from rushmem_client import MemoryClient
from rushmem_contract.errors import (
    ConfigurationError,
    DatabaseUnavailable,
    Forbidden,
    InputTooLarge,
    InvalidInput,
    NotFound,
    ServiceUnavailable,
)
from rushmem_tools.cli import main
from rushmem_tools.local.server import LocalApi, make_server
from tests.support.recall import (
    ROOT,
    TEMPLATE,
    body_of,
    event,
    invoke,
    manifest_entries,
    start,
    token,
)


def send(url: str, evt: dict[str, Any]) -> httpx.Response:
    """The HTTP request an events/ file describes."""
    target = evt["rawPath"] + (f"?{evt['rawQueryString']}" if evt.get("rawQueryString") else "")
    body = evt.get("body") or ""
    content = base64.b64decode(body) if evt.get("isBase64Encoded") else body.encode()
    headers = {k: v for k, v in evt["headers"].items() if k not in ("host", "content-length")}
    return httpx.request(evt["requestContext"]["http"]["method"], url + target, headers=headers, content=content)


def _is_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except ValueError:
        return False
    return True


def without_request_id(body: Any) -> Any:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):  # /mcp: a JSON-RPC error
        return {**body, "error": {**body["error"], "data": without_request_id(body["error"]["data"])}}
    return {k: v for k, v in body.items() if k != "request_id"} if isinstance(body, dict) else body


# ---- serve answers as invoke does ----------------------------------------------------------


def test_every_event_answers_the_same_over_http_as_through_invoke(served: str) -> None:
    for entry in manifest_entries():
        evt = event(entry["file"])
        if evt.get("isBase64Encoded") and not _is_base64(evt.get("body") or ""):
            continue  # API Gateway's own flag on a body it mangled: no HTTP request carries that
        direct = invoke(evt)
        answer = send(served, evt)
        assert answer.status_code == direct["statusCode"] == entry["expect"]["statusCode"], entry["file"]
        if answer.status_code >= 400:
            assert without_request_id(answer.json()) == without_request_id(body_of(direct)), entry["file"]
            assert answer.headers["content-type"] == "application/json"
        elif answer.status_code == 204:
            assert answer.content == b""
        else:
            assert set(answer.json()) == set(body_of(direct)), entry["file"]
    assert send(served, event("http-recall-wrong-method.json")).headers["allow"] == "POST"


def test_curl_style_requests(served: str) -> None:
    added = httpx.post(f"{served}/memories", json={"user_id": "u1", "memories": [{"content": "Likes Rust"}]})
    assert added.status_code == 201
    recalled = httpx.post(f"{served}/recall", json={"user_id": "u1", "query": "rust"})
    assert recalled.json()["memories"][0]["content"] == "Likes Rust"
    # curl -d without -H sends form encoding: the answer says what to do.
    form = httpx.post(f"{served}/recall", content=b'{"user_id":"u1","query":"rust"}',
                      headers={"content-type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert form.status_code == 415 and "application/json" in form.json()["message"]
    bad_token = httpx.post(f"{served}/recall", json={"query": "x"}, headers={"authorization": "Bearer nonsense"})
    assert bad_token.status_code == 401


def test_the_serve_command_prints_its_url_and_stops_on_sigterm(lambda_env: str) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "rushmem_tools", "serve", "--port", "0", "--no-warm", "--template", str(TEMPLATE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        started = json.loads(process.stdout.readline())
        assert started["function"] == "RecallFunction"
        answer = httpx.get(f"{started['url']}/memories", params={"user_id": "nobody"}, timeout=30)
        assert answer.status_code == 200 and answer.json() == {"memories": [], "next_cursor": None}
        # serve turns the memory page on (off by default in AWS).
        page = httpx.get(started["page"], timeout=30)
        assert page.status_code == 200 and 'src="page/page.js"' in page.text
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert process.stdout.read() == ""  # handler logs went to stderr, stdout stays JSON
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_invoke_command_prints_the_handlers_answer(lambda_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["invoke", "RecallFunction", str(ROOT / "events/http-recall-iam.json"), "--template", str(TEMPLATE)])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out)["statusCode"] == 200


def test_openapi_command_writes_the_resolvers_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "openapi.json"
    assert main(["openapi", "--out", str(out), "--template", str(TEMPLATE)]) == 0
    text = out.read_text()
    document = json.loads(text)
    operations = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    assert operations == {
        ("POST", "/recall"), ("POST", "/memories"), ("GET", "/memories"),
        ("DELETE", "/memories"), ("DELETE", "/memories/{memory_id}"), ("GET", "/memories/{memory_id}/history"),
        ("GET", "/memories/{memory_id}"), ("PATCH", "/memories/{memory_id}"), ("GET", "/memories/export"),
        ("POST", "/conversations"),
        ("GET", "/instructions"), ("PUT", "/instructions"), ("GET", "/instructions/history"),
        ("GET", "/usage"), ("GET", "/erasures/{erasure_id}"), ("GET", "/erasures"),
        ("GET", "/memories/pending"), ("POST", "/memories/{pending_id}/review"), ("GET", "/users"),
    }  # fmt: skip
    assert "422" not in {code for ops in document["paths"].values() for op in ops.values() for code in op["responses"]}
    assert "201" in document["paths"]["/memories"]["post"]["responses"]
    refs = {ref.rsplit("/", 1)[1] for ref in re.findall(r'"\$ref": "([^"]+)"', text)}
    assert refs <= set(document["components"]["schemas"])
    assert main(["openapi", "--template", str(TEMPLATE)]) == 0
    assert json.loads(capsys.readouterr().out) == document


def test_every_route_of_the_resolver_reaches_it_through_the_templates_http_api() -> None:
    """The template routes the root, the OAuth metadata and everything else (``/{proxy+}``, any
    method) to the function, each with its authorisation in the API's definition (else it would be
    open): every route of the resolver, the operations' included, is reachable with the parameter's
    authorisation, and a new operation needs no route in the template."""
    from rushmem_tools.local.runtime import load_template

    resources = load_template(TEMPLATE)["Resources"]
    events = resources["RecallFunction"]["Properties"]["Events"].values()
    routed = {(e["Properties"]["Method"].upper(), e["Properties"]["Path"]) for e in events if e["Type"] == "HttpApi"}
    public = {("GET", path) for path in PUBLIC_PATHS}
    assert routed == {("GET", "/"), ("ANY", "/{proxy+}")} | public
    paths = resources["MemoryApi"]["Properties"]["DefinitionBody"]["paths"]
    secured = {(m.upper(), p) for p, ops in paths.items() for m, op in ops.items() if op.get("security")}
    assert secured == {("GET", "/"), ("X-AMAZON-APIGATEWAY-ANY-METHOD", "/{proxy+}")}


# ---- the client ----------------------------------------------------------------------------


def test_client_round_trip_and_typed_errors(served: str) -> None:
    with MemoryClient(served, auth="none", timeout=30) as client:
        stored = client.add(["Prefers pnpm over npm", {"content": "Ships on Fridays", "category": "decision"}],
                            user_id="u1", project_id="svg")  # fmt: skip
        assert stored.created == 2
        result = client.recall("pnpm", user_id="u1", project_id="svg", limit=1)
        assert [m.content for m in result.memories] == ["Prefers pnpm over npm"]
        assert result.prompt_block.startswith("[RUSH_MEMORY]\n")
        assert result.prompt_block.endswith("\nRelevant memories:\n1. Prefers pnpm over npm\n[/RUSH_MEMORY]")
        chat = [{"role": "user", "content": "old"}, {"role": "user", "content": "When do we ship?"}]
        assert client.recall(messages=chat, user_id="u1").query == "When do we ship?"
        page = client.list(user_id="u1", limit=1)
        assert len(page.memories) == 1 and page.next_cursor
        assert {m.content for m in client.pages(client.list, user_id="u1")} == {
            "Prefers pnpm over npm",
            "Ships on Fridays",
        }
        assert [e.event for e in client.history(stored.ids[0], user_id="u1").events] == ["created"]
        assert client.delete(stored.ids[0], user_id="u1") is None
        with pytest.raises(NotFound):
            client.delete(stored.ids[0], user_id="u1")
        with pytest.raises(InvalidInput) as bad_limit:
            client.recall("x", user_id="u1", limit=0)  # refused before anything is sent, as the server would
        assert bad_limit.value.field == "limit" and not getattr(bad_limit.value, "__notes__", None)
        with pytest.raises(InputTooLarge) as long_query:  # over the deployment's limit: the server's refusal
            client.recall("x" * 5000, user_id="u1")
        assert any("request id" in note for note in long_query.value.__notes__)
        with pytest.raises(InvalidInput) as no_user:
            client.recall("x")
        assert no_user.value.field == "user_id"
        with pytest.raises(InputTooLarge):
            client.recall("x" * 5000, user_id="u1")
        client.forget_user("u1")
        assert client.list(user_id="u1").memories == []
    with MemoryClient(served + "/v2", auth="none") as wrong, pytest.raises(ConfigurationError, match="API URL"):
        wrong.recall("x", user_id="u1")


def test_client_with_jwt_acts_only_for_the_tokens_user(served: str) -> None:
    alice = MemoryClient(served, auth="jwt", token=token("alice"))
    bob = MemoryClient(served, auth="jwt", token=lambda: token("bob"))
    alice.add(["Alice uses Vim"])
    bob.add(["Bob uses Emacs"])
    assert [m.content for m in alice.recall("uses").memories] == ["Alice uses Vim"]
    assert [m.content for m in bob.list().memories] == ["Bob uses Emacs"]
    with pytest.raises(Forbidden):
        bob.recall("uses", user_id="alice")
    with pytest.raises(Forbidden):
        bob.forget_user("alice")
    (alices,) = alice.list().memories
    with pytest.raises(NotFound):  # another user's memory looks like none at all
        bob.delete(alices.id)
    assert [m.content for m in alice.list().memories] == ["Alice uses Vim"]


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_client_signs_with_sigv4_exactly_the_request_it_sends(aws_env: None) -> None:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    seen: list[httpx.Request] = []

    def check(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        authorization = request.headers["authorization"]
        assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
        assert "/eu-west-1/execute-api/aws4_request" in authorization
        assert request.headers["x-amz-security-token"] == "session-token"
        signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
        # Recompute the signature from what arrived: any difference in URL encoding would show.
        again = AWSRequest(method=request.method, url=str(request.url), data=request.content,
                           headers={k: v for k, v in request.headers.items() if k in signed})  # fmt: skip
        again.context["timestamp"] = request.headers["x-amz-date"]
        auth = SigV4Auth(Credentials("AKIDEXAMPLE", os.environ["AWS_SECRET_ACCESS_KEY"], "session-token"),
                         "execute-api", "eu-west-1")  # fmt: skip
        signature = auth.signature(auth.string_to_sign(again, auth.canonical_request(again)), again)
        assert authorization.endswith(f"Signature={signature}")
        if request.method == "GET":
            return httpx.Response(200, json={"memories": [], "next_cursor": None})
        return httpx.Response(200, json={"memories": [], "prompt_block": "", "query": "q"})

    url = "https://abc123defg.execute-api.eu-west-1.amazonaws.com"
    client = MemoryClient(url, http=httpx.Client(transport=httpx.MockTransport(check)))
    client.recall("what's up?", user_id="user 1/ü")
    client.list(user_id="user 1/ü+&=", cursor="abc=")
    assert len(seen) == 2 and seen[1].url.params["user_id"] == "user 1/ü+&="


def test_client_iam_against_serve(served: str, aws_env: None) -> None:
    client = MemoryClient(served, auth="iam", region="eu-west-1")
    client.add(["Signed requests work"], user_id="u1")
    assert client.recall("signed", user_id="u1").memories[0].content == "Signed requests work"


def test_client_iam_without_credentials_or_region_is_a_configuration_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, aws_env: None
) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    with pytest.raises(ConfigurationError, match="region"):
        MemoryClient("http://127.0.0.1:9", auth="iam")
    assert MemoryClient("https://abc.execute-api.us-east-2.amazonaws.com")._region == "us-east-2"
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    with pytest.raises(ConfigurationError, match="credentials"):
        MemoryClient("https://abc.execute-api.us-east-2.amazonaws.com")


def test_client_unreachable_api_is_service_unavailable_after_retries() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    calls = 0

    def count(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ConnectError("refused", request=request)

    client = MemoryClient(f"http://127.0.0.1:{port}", auth="none", retries=1,
                          http=httpx.Client(transport=httpx.MockTransport(count)))  # fmt: skip
    with pytest.raises(ServiceUnavailable, match="cannot reach"):
        client.recall("x", user_id="u1")
    assert calls == 2
    with pytest.raises(ServiceUnavailable):
        MemoryClient(f"http://127.0.0.1:{port}", auth="none", retries=0).recall("x", user_id="u1")


def test_client_database_down_is_database_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", "postgresql://agent@127.0.0.1:9/memories")
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("AGENT_MEMORY_CONNECT_TIMEOUT_S", "1")
    url, server = start()
    try:
        with pytest.raises(DatabaseUnavailable, match="try again"):
            MemoryClient(url, auth="none", retries=1).recall("x", user_id="u1")
    finally:
        server.shutdown()
        server.server_close()


def test_forget_quotes_the_id(served: str) -> None:
    client = MemoryClient(served, auth="none")
    with pytest.raises(InvalidInput) as bad:
        client.delete("../memories", user_id="u1")
    assert bad.value.field == "memory_id"
    with pytest.raises(NotFound):
        client.delete(uuid.uuid4(), user_id="u1")


def test_serve_takes_50_connections_at_once_before_it_accepts_any() -> None:
    """The listen backlog: socketserver's default of 5 left the 7th of 50 simultaneous clients
    waiting for a SYN retry (`rushmem bench load` saw connection errors)."""
    server = make_server(LocalApi(TEMPLATE))  # listening, not accepting yet
    clients = [socket.socket() for _ in range(50)]
    try:
        connected = 0
        for client in clients:
            client.settimeout(0.5)
            try:
                client.connect(("127.0.0.1", server.server_port))
            except OSError:
                continue
            connected += 1
        assert connected == 50
    finally:
        for client in clients:
            client.close()
        server.server_close()
