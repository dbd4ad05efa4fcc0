"""`rushmem smoke --url URL` against `rushmem serve` over real HTTP: without auth, with a real
token verified against a local issuer's JWKS (`serve --jwt-issuer`), and a stack that refuses it;
a clear verdict, the exit code, and nothing left behind."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from rushmem.config import get_settings
from rushmem_client import MemoryClient
from rushmem_tools.cli import main
from rushmem_tools.local.server import LocalApi, make_server
from rushmem_tools.local.tokens import JwtVerifier
from tests.support.oauth_issuer import AUDIENCE, LocalIssuer
from tests.support.recall import TEMPLATE
from tests.support.sigv4 import ACCESS_KEY, REGION, SECRET_KEY, SESSION_TOKEN, SigV4Gateway


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CHECKS = ["remember", "recall", "list", "mcp", "conversation", "forget", "gone"]


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
    assert lines[-1] == f"smoke: PASS (7 of 7 checks passed) against {served}"
    assert "extracted" in lines[4] and "stored, recalled after" in lines[4] and "(limit 30 s)" in lines[4], lines[4]
    with MemoryClient(served) as client:
        assert client.list(user_id="smoke-user").memories == []


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
        assert [m.id for m in client.list().memories] == [kept]


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


def test_smoke_names_the_extraction_stage_when_the_model_fails(
    lambda_env: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The write path's LLM is unreachable (as an end-of-life Bedrock model would be): remember and
    recall still pass, the conversation check FAILs naming the extraction stage, nothing is left."""
    monkeypatch.setenv("AGENT_MEMORY_LLM_PROVIDER", "openai")
    monkeypatch.setenv("AGENT_MEMORY_LLM_BASE_URL", f"http://127.0.0.1:{closed_port()}/v1")
    monkeypatch.setenv("AGENT_MEMORY_LLM_API_KEY", "sk-test")
    monkeypatch.setenv("AGENT_MEMORY_MAX_RETRIES", "0")
    get_settings.cache_clear()
    for url in serve(LocalApi(TEMPLATE)):
        assert main(["smoke", "--url", url, "--user", "smoke-user", "--no-mcp", "--json"]) == 1
        report = json.loads(capsys.readouterr().out)
        by_name = {c["check"]: c for c in report["checks"]}
        assert by_name["remember"]["ok"] and by_name["recall"]["ok"]
        assert not by_name["conversation"]["ok"]
        assert by_name["conversation"]["detail"].startswith("stage extract: the extraction model failed")
        assert by_name["gone"]["ok"]
        with MemoryClient(url) as client:
            assert client.list(user_id="smoke-user").memories == []


def test_smoke_checks_the_stacks_models_first(
    served: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--stack: the stack's parameters (DescribeStacks) name the models; one past its end of life
    FAILs before anything is written, naming it and what to set instead."""
    from datetime import UTC, datetime

    from botocore.stub import Stubber

    from rushmem.providers import lifecycle
    from rushmem_tools.cli import smoke
    from tests.support.bedrock import bedrock_client, model_answer

    old = "anthropic.claude-3-haiku-20240307-v1:0"
    cloudformation = __import__("boto3").client(
        "cloudformation", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
    )
    bedrock = bedrock_client()
    with Stubber(cloudformation) as cfn, Stubber(bedrock) as stub:
        parameters = {"LlmProvider": "bedrock", "LlmModel": old, "EmbeddingProvider": "bedrock", "EmbeddingModel": ""}
        cfn.add_response(
            "describe_stacks",
            {
                "Stacks": [
                    {
                        "StackName": "agent-memory-quickstart",
                        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/agent-memory-quickstart/4f1b",
                        "CreationTime": datetime(2026, 11, 1, tzinfo=UTC),
                        "StackStatus": "UPDATE_COMPLETE",
                        "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
                    }
                ]
            },
            {"StackName": "agent-memory-quickstart"},
        )
        stub.add_response(
            "get_foundation_model",
            model_answer(old, "LEGACY", end_of_life=datetime(2026, 9, 10, tzinfo=UTC)),
            {"modelIdentifier": old},
        )
        stub.add_response(
            "get_foundation_model",
            model_answer("amazon.titan-embed-text-v2:0", "ACTIVE"),
            {"modelIdentifier": "amazon.titan-embed-text-v2:0"},
        )
        settings = smoke.stack_settings(cloudformation, "agent-memory-quickstart")
        assert settings.bedrock_region == "us-east-1"
        monkeypatch.setattr(lifecycle, "bedrock_control_client", lambda s: bedrock)
        run = smoke.run_smoke(served, user_id="smoke-user", bedrock_settings=settings)
    [check] = run.checks
    assert check["check"] == "models" and not check["ok"]
    assert (
        old in check["detail"] and "2026-09-10" in check["detail"] and "us.amazon.nova-2-lite-v1:0" in check["detail"]
    )
