"""``rushmem smoke --url URL``: is a deployed stack (or ``rushmem serve``) working, end to end?

Against the API at URL, as the user a caller would be (IAM-signed with ``--user``, or the ``sub``
of ``--token``): with ``--stack``, first check that the stack's Bedrock models are still offered;
remember two facts, recall them, list them, call the MCP endpoint's tools, hand over a conversation
(POST /conversations: extracted by the LLM, embedded, stored) and recall what it yielded within
``WRITE_PATH_WAIT_S`` (a FAIL names the stage: extract, store or recall), forget everything the
run stored and check it is gone. Each check prints PASS or FAIL with the reason; the last line is the
verdict, and the exit code says it too (0 PASS, 1 FAIL). Everything lives in a project of its own
(``smoke-<random>``) and only what the run created is deleted, so it is safe on a stack in use.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rushmem.service import Memory
from rushmem_contract.errors import AgentMemoryError, DatabaseResuming, NotFound, ProviderError
from rushmem_contract.kinds import EXIT_OK
from rushmem_tools.cli.output import AddCommand, emit

if TYPE_CHECKING:
    from rushmem_client import MemoryClient
    from rushmem_client.calls import Auth

EXIT_FAILED = 1
MCP_TOOL = "recall_memories"
RESUME_POLL_S = 5.0
# A conversation handed over must be recallable within this (POST /conversations stores before it
# answers; the wait covers a reader's lag).
WRITE_PATH_WAIT_S = 30.0
WRITE_PATH_POLL_S = 1.0
OPTIONAL_CHECKS = ("mcp", "conversation")  # what run_smoke's ``skip`` may name
STDIN = "-"


@dataclass
class SmokeRun:
    """What one run found: each check's name, whether it passed, and why not."""

    url: str
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c["ok"] for c in self.checks)

    def check(self, name: str, step: Callable[[], str]) -> bool:
        """Run one check; ``step`` returns what it saw, or raises (AssertionError: the stack answered
        wrongly; anything else: the call failed)."""
        started = time.perf_counter()
        try:
            detail = step()
        except AssertionError as exc:
            ok, detail = False, str(exc) or "unexpected answer"
        except Exception as exc:  # the verdict must name any failure, not end in a traceback
            ok, detail = False, f"{type(exc).__name__}: {exc}{_hint(str(exc))}"
        else:
            ok = True
        self.checks.append(
            {"check": name, "ok": ok, "detail": detail, "ms": round((time.perf_counter() - started) * 1000)}
        )
        return ok


HINTS = {
    "HTTP 401": " (the API refused the request: the token is missing, expired or for another client)",
    "HTTP 403": " (the credentials may lack execute-api:Invoke on the stack's ApiInvokeArn)",
}


def _hint(message: str) -> str:
    return next((hint for status, hint in HINTS.items() if status in message), "")


@dataclass(frozen=True)
class Waits:
    """How long a run waits, in seconds."""

    request_s: float = 30.0  # for each request's answer
    resume_s: float = 60.0  # for a paused database (DatabaseMinCapacity=0) to resume
    write_path_s: float = WRITE_PATH_WAIT_S  # for a conversation handed over to be recallable


@dataclass
class _Steps:
    """The checks of one run, in order, on the stack behind ``client``; what they stored."""

    url: str
    client: MemoryClient
    mode: Auth
    token: str | None
    region: str | None
    waits: Waits
    user: str | None
    project: str = field(default_factory=lambda: f"smoke-{uuid.uuid4().hex[:12]}")
    marker: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    created: list[str] = field(default_factory=list)  # what this run stored
    stored: list[str] = field(default_factory=list)  # of those, what is not forgotten yet

    def remember(self) -> str:
        facts = [f"Smoke test {self.marker}: prefers pnpm over npm", f"Smoke test {self.marker}: deploys with SAM"]
        waited = 0.0
        while True:
            try:
                result = self.client.add(facts, user_id=self.user, project_id=self.project)
                break
            except DatabaseResuming:
                # A paused Aurora cluster (DatabaseMinCapacity=0) takes ~15 s to resume; nothing was stored.
                if waited >= self.waits.resume_s:
                    raise
                time.sleep(RESUME_POLL_S)
                waited += RESUME_POLL_S
        # Only new rows are this run's to delete: a fact folded into an existing memory is the user's.
        assert result.created == len(result.ids) == 2, f"2 memories sent, {result.created} created"
        self.created.extend(str(i) for i in result.ids)
        self.stored.extend(self.created)
        after = f" (after {waited:.0f} s for the database to resume)" if waited else ""
        return f"2 memories stored in project {self.project}{after}"

    def recall(self) -> str:
        # strong: read the writer, where the stack has a reader endpoint that may lag.
        result = self.client.recall(
            "which package manager", user_id=self.user, project_id=self.project, consistency="strong"
        )
        found = [str(m.id) for m in result.memories]
        assert self.created[0] in found, f"the pnpm memory is not among the {len(found)} recalled"
        assert self.marker in result.prompt_block, "the prompt block does not hold the recalled memory"
        return f"{len(found)} recalled, the prompt block holds them"

    def listed(self) -> str:
        page = self.client.list(user_id=self.user, project_id=self.project, consistency="strong")
        ids = {str(m.id) for m in page.memories}
        assert set(self.created) <= ids, f"listed {len(ids)}, not the 2 stored"
        return f"{len(ids)} listed"

    def mcp_tools(self) -> str:
        import anyio

        return anyio.run(
            _mcp_recall,
            self.url,
            self.mode,
            self.token,
            self.user,
            self.project,
            self.region,
            self.waits.request_s,
            self.marker,
        )

    def conversation(self) -> str:
        # The write path as a chat app uses it: a finished conversation is extracted (the LLM),
        # embedded and stored, then recallable. The stage that fails is named.
        marker = self.marker
        messages = [
            {"role": "user", "content": f"For project {marker}: I always use Helix as my editor."},
            {"role": "assistant", "content": "Noted, Helix it is."},
            {"role": "user", "content": f"And I prefer Fish as my shell for {marker}."},
        ]
        try:
            outcome = self.client.ingest_conversation(
                messages, user_id=self.user, project_id=self.project, conversation_id=f"smoke-{marker}"
            )
        except ProviderError as exc:
            raise AssertionError(f"stage extract: the extraction model failed ({exc})") from exc
        new = [str(f.id) for f in outcome.facts if f.action == "created"] or [str(i) for i in outcome.ids]
        for memory_id in new:
            if memory_id not in self.created:
                self.created.append(memory_id)
                self.stored.append(memory_id)
        assert outcome.extracted > 0, f"stage extract: the model kept no fact from the conversation ({outcome.status})"
        assert outcome.ids, f"stage store: {outcome.extracted} extracted, none stored ({outcome.status})"
        limit = self.waits.write_path_s
        waited, started = 0.0, time.perf_counter()
        while True:
            result = self.client.recall(
                f"which editor for project {marker}", user_id=self.user, project_id=self.project, consistency="strong"
            )
            if {str(m.id) for m in result.memories} & {str(i) for i in outcome.ids}:
                break
            waited = time.perf_counter() - started
            assert waited < limit, f"stage recall: {len(outcome.ids)} stored, none recalled after {limit:.0f} s"
            time.sleep(WRITE_PATH_POLL_S)
        stored = f"{outcome.extracted} extracted, {len(outcome.ids)} stored"
        return f"{stored}, recalled after {waited:.1f} s (limit {limit:.0f} s)"

    def forget(self) -> str:
        for memory_id in list(self.stored):
            try:
                self.client.delete(memory_id, user_id=self.user)
            except NotFound:
                raise AssertionError(f"{memory_id} was not there to forget") from None
            self.stored.remove(memory_id)
        return f"{len(self.created)} forgotten"

    def gone(self) -> str:
        # The project's list also holds the user's memories of no project: only this run's must be gone.
        listed = self.client.list(user_id=self.user, project_id=self.project, consistency="strong")
        left = [str(m.id) for m in listed.memories if str(m.id) in self.created]
        assert not left, f"{len(left)} forgotten memories still listed"
        try:
            self.client.get(self.created[0], user_id=self.user, consistency="strong")
        except NotFound:
            return "none left"
        raise AssertionError("a forgotten memory can still be read")

    def clean_up(self) -> None:
        """A failed run leaves nothing behind either."""
        for memory_id in self.stored:
            with contextlib.suppress(AgentMemoryError, OSError):
                self.client.delete(memory_id, user_id=self.user)


def run_smoke(
    url: str,
    *,
    token: str | None = None,
    auth: Auth | None = None,
    user_id: str | None = None,
    region: str | None = None,
    skip: Collection[str] = (),
    bedrock_settings: Any = None,
    waits: Waits = Waits(),
    report: Callable[[dict[str, Any]], None] | None = None,
) -> SmokeRun:
    """Models (with ``bedrock_settings``: the stack's), remember, recall, list, MCP, the conversation,
    forget against ``url``; returns every check's outcome. ``skip``: of OPTIONAL_CHECKS, those not to run."""
    # Imported here: the HTTP client costs the other commands' start-up for nothing.
    from rushmem_client import MemoryClient
    from rushmem_client.calls import infer_auth

    run = SmokeRun(url)
    mode = infer_auth(url, auth, token)
    # With a token the user is its 'sub' (the API refuses any other); else this run's own user.
    user = None if mode == "jwt" else (user_id or f"agent-memory-smoke-{uuid.uuid4().hex[:8]}")
    client = MemoryClient(url, auth=mode, token=token, region=region, timeout=waits.request_s)
    steps = _Steps(url, client, mode, token, region, waits, user)

    def step(name: str, body: Callable[[], str]) -> bool:
        ok = run.check(name, body)
        if report:
            report(run.checks[-1])
        return ok

    try:
        if bedrock_settings is not None and not step("models", lambda: models_check(bedrock_settings)):
            return run
        if step("remember", steps.remember):
            step("recall", steps.recall)
            step("list", steps.listed)
            if "mcp" not in skip:
                step("mcp", steps.mcp_tools)
            if "conversation" not in skip:
                step("conversation", steps.conversation)
            if step("forget", steps.forget):
                step("gone", steps.gone)
    finally:
        steps.clean_up()
        client.close()
    return run


async def _mcp_recall(
    url: str,
    auth: Auth,
    token: str | None,
    user: str | None,
    project: str,
    region: str | None,
    timeout: float,
    marker: str,
) -> str:
    """The MCP endpoint, as an MCP host calls it: list the tools, then recall through one."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from rushmem_client.mcp_auth import mcp_http_client

    http = mcp_http_client(
        url.rstrip("/"), user_id=user, project_id=project, auth=auth, token=token, region=region, timeout=timeout
    )
    async with http, Client(streamable_http_client(f"{url.rstrip('/')}/mcp", http_client=http)) as mcp:
        tools = {t.name for t in (await mcp.list_tools()).tools}
        assert MCP_TOOL in tools, f"no {MCP_TOOL} tool among {sorted(tools)}"
        result = await mcp.call_tool(MCP_TOOL, {"query": "which package manager"})
        text = " ".join(getattr(block, "text", "") for block in result.content)
        assert not result.is_error, f"{MCP_TOOL} failed: {text[:200]}"
        assert marker in text, f"{MCP_TOOL} did not return the stored memory"
    return f"{len(tools)} tools, {MCP_TOOL} returned the memory"


STACK_SETTINGS = {
    "LlmProvider": "llm_provider",
    "LlmModel": "llm_model",
    "EmbeddingProvider": "embedding_provider",
    "EmbeddingModel": "embedding_model",
    "RerankProvider": "rerank_provider",
    "RerankModel": "rerank_model",
    "BedrockRegion": "bedrock_region",
}


def stack_settings(cloudformation: Any, stack: str) -> Any:
    """The model settings a deployed stack runs with, from its parameters (DescribeStacks)."""
    from rushmem.config import Settings

    described = cloudformation.describe_stacks(StackName=stack)["Stacks"][0]
    values = {p["ParameterKey"]: p.get("ResolvedValue", p.get("ParameterValue", "")) for p in described["Parameters"]}
    overrides = {field: values[key] for key, field in STACK_SETTINGS.items() if str(values.get(key) or "").strip()}
    region = str(described["StackId"]).split(":")[3]
    overrides.setdefault("bedrock_region", region)
    return Settings(**overrides)


def models_check(settings: Any, bedrock: Any = None) -> str:
    """Each Bedrock model the stack calls is ACTIVE (or LEGACY, with a warning naming its end of life);
    one past its end of life or missing fails, naming it and what to set instead."""
    service = Memory(settings)
    try:
        checks = service.admin.bedrock_models(bedrock)
    finally:
        service.close()
    if not checks:
        return "no Bedrock model configured"
    failed = [c.message() for c in checks if not c.ok]
    assert not failed, "; ".join(failed)
    return "; ".join(("WARNING " if c.warning else "") + c.message() for c in checks)


def cmd_smoke(service: Memory, args: argparse.Namespace) -> int:
    del service  # the stack under test is at --url; nothing local is touched
    token: str | None = args.token
    if token == STDIN:  # a token on the command line shows in the process list
        token = sys.stdin.readline().strip()

    def line(check: dict[str, Any]) -> None:
        if not args.json:
            status = "PASS" if check["ok"] else "FAIL"
            print(f"{status}  {check['check']:<12} {check['detail']} ({check['ms']} ms)", flush=True)

    settings = None
    if args.stack:
        import boto3

        settings = stack_settings(boto3.client("cloudformation", region_name=args.region), args.stack)
    run = run_smoke(
        args.url,
        bedrock_settings=settings,
        token=token or None,
        auth=args.auth,
        user_id=args.user,
        region=args.region,
        skip=[name for name, off in (("mcp", args.no_mcp), ("conversation", args.no_write_path)) if off],
        waits=Waits(request_s=args.timeout),
        report=line,
    )
    passed = sum(1 for c in run.checks if c["ok"])
    verdict = "PASS" if run.passed else "FAIL"
    if args.json:
        emit({"verdict": verdict, "url": run.url, "passed": passed, "checks": run.checks})
    else:
        print(f"smoke: {verdict} ({passed} of {len(run.checks)} checks passed) against {run.url}")
    return EXIT_OK if run.passed else EXIT_FAILED


def register(add: AddCommand) -> None:
    """Adds ``smoke`` through cli.build_parser's ``add`` helper."""
    p = add(
        "smoke",
        cmd_smoke,
        "check a deployed stack (or `rushmem serve`) end to end: remember, recall, list, the MCP tools, "
        "a conversation, forget; PASS or FAIL, exit 0 or 1",
    )
    p.add_argument("--url", required=True, help="the API's URL (the stack's ApiUrl output)")
    p.add_argument(
        "--token",
        help="a bearer token (ApiAuthorization=JWT or COGNITO): the checks run as its 'sub'; '-' reads it from stdin",
    )
    p.add_argument(
        "--auth",
        choices=["iam", "jwt", "none"],
        help="default: jwt with --token, iam (SigV4, the default AWS credentials) for an execute-api URL, else none",
    )
    p.add_argument("--user", help="the user to act as without a token (default: a new agent-memory-smoke-* user)")
    p.add_argument("--region", help="the API's region for SigV4 (default: from the URL)")
    p.add_argument("--no-mcp", action="store_true", help="skip the MCP check")
    p.add_argument(
        "--stack",
        help="the stack's name: first check that each Bedrock model it is configured with is still offered "
        "(GetFoundationModel's lifecycle; LEGACY warns, past its end of life fails)",
    )
    p.add_argument(
        "--no-write-path",
        action="store_true",
        help="skip the conversation check (POST /conversations: extracted by the LLM, embedded, recallable)",
    )
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
