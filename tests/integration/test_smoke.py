"""`agent-memory smoke --url URL` against `agent-memory serve` over real HTTP: without auth, with a real
token verified against a local issuer's JWKS (`serve --jwt-issuer`), and a stack that refuses it;
a clear verdict, the exit code, and nothing left behind."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest

from agent_memory.config import get_settings
from agent_memory_client import MemoryClient
from agent_memory_tools.cli import main
from agent_memory_tools.local.server import LocalApi, make_server
from agent_memory_tools.local.tokens import JwtVerifier
from tests.support.oauth_issuer import AUDIENCE, LocalIssuer
from tests.support.recall import TEMPLATE
from tests.support.sigv4 import ACCESS_KEY, REGION, SECRET_KEY, SESSION_TOKEN, SigV4Gateway

CHECKS = ["remember", "recall", "list", "mcp", "forget", "gone"]


def serve(api: LocalApi) -> Iterator[str]:
    server = make_server(api, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def served(lambda_env: str) -> Iterator[str]:
    yield from serve(LocalApi(TEMPLATE))


@pytest.fixture
def served_with_tokens(lambda_env: str, issuer: LocalIssuer, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("AGENT_MEMORY_OAUTH_ISSUER", issuer.url)
    get_settings.cache_clear()
    yield from serve(LocalApi(TEMPLATE, verifier=JwtVerifier(issuer.url, [AUDIENCE])))


def test_smoke_passes_against_serve_and_leaves_nothing(served: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["smoke", "--url", served, "--user", "smoke-user"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[1] for line in lines[:-1]] == CHECKS
    assert all(line.startswith("PASS") for line in lines[:-1])
    assert lines[-1] == f"smoke: PASS (6 of 6 checks passed) against {served}"
    with MemoryClient(served) as client:
        assert list(client.list_memories(user_id="smoke-user")) == []


def test_smoke_with_a_token_runs_as_its_subject(
    served_with_tokens: str, issuer: LocalIssuer, capsys: pytest.CaptureFixture[str]
) -> None:
    with MemoryClient(served_with_tokens, token=issuer.token("alice")) as client:
        kept = client.add(["Alice's own memory, not the smoke test's"]).ids[0]
    code = main(["smoke", "--url", served_with_tokens, "--token", issuer.token("alice"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["verdict"] == "PASS", report
    assert [c["check"] for c in report["checks"]] == CHECKS
    # Only what the run created is gone: the user's own memory stays.
    with MemoryClient(served_with_tokens, token=issuer.token("alice")) as client:
        assert [m.id for m in client.list_memories()] == [kept]


def test_smoke_fails_with_the_reason_and_exit_1(
    served_with_tokens: str, issuer: LocalIssuer, capsys: pytest.CaptureFixture[str]
) -> None:
    expired = issuer.token("alice", expires_in=-3600)
    assert main(["smoke", "--url", served_with_tokens, "--token", expired]) == 1
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("FAIL  remember"), lines
    assert lines[-1] == f"smoke: FAIL (0 of 1 checks passed) against {served_with_tokens}"


def test_smoke_signs_with_sigv4_as_an_iam_stack_wants(
    served: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a token: every request (REST and MCP) signed with the default credentials, checked by an
    independent SigV4 verifier standing where API Gateway's AWS_IAM authorizer would."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION_TOKEN)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    gateway = SigV4Gateway(served)
    try:
        assert main(["smoke", "--url", gateway.url, "--auth", "iam", "--region", REGION, "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["verdict"] == "PASS" and gateway.refused == [], (report, gateway.refused)
        # Wrong credentials: the gateway refuses, the verdict says so.
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        assert main(["smoke", "--url", gateway.url, "--auth", "iam", "--region", REGION]) == 1
        lines = capsys.readouterr().out.strip().splitlines()
        assert lines[0].startswith("FAIL  remember") and "403" in lines[0], lines
        assert gateway.refused == ["signature mismatch"]
    finally:
        gateway.close()
