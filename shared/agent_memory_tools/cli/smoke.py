"""``agent-memory smoke --url URL``: is a deployed stack (or ``agent-memory serve``) working, end to end?

Against the API at URL, as the user a caller would be (IAM-signed with ``--user``, or the ``sub``
of ``--token``): remember two facts, recall them, list them, call the MCP endpoint's tools, forget
them and check they are gone. Each check prints PASS or FAIL with the reason; the last line is the
verdict, and the exit code says it too (0 PASS, 1 FAIL). Everything lives in a project of its own
(``smoke-<random>``) and only what the run created is deleted, so it is safe on a stack in use.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_memory.service import Memory
from agent_memory_contract.errors import AgentMemoryError, DatabaseResuming, NotFound
from agent_memory_contract.kinds import EXIT_OK
from agent_memory_tools.cli.output import emit

if TYPE_CHECKING:
    from agent_memory_client import MemoryClient
    from agent_memory_client.calls import Auth

EXIT_FAILED = 1
MCP_TOOL = "recall_memories"
RESUME_POLL_S = 5.0
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


@dataclass
class _Steps:
    """The checks of one run, in order, on the stack behind ``client``; what they stored."""

    url: str
    client: MemoryClient
    mode: Auth
    token: str | None
    region: str | None
    timeout: float
    resume_wait_s: float
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
                if waited >= self.resume_wait_s:
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
        page = self.client.list_memories(user_id=self.user, project_id=self.project, consistency="strong")
        ids = {str(m.id) for m in page}
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
            self.timeout,
            self.marker,
        )

    def forget(self) -> str:
        for memory_id in list(self.stored):
            assert self.client.forget_memory(memory_id, user_id=self.user), f"{memory_id} was not there to forget"
            self.stored.remove(memory_id)
        return "2 forgotten"

    def gone(self) -> str:
        # The project's list also holds the user's memories of no project: only this run's must be gone.
        listed = self.client.list_memories(user_id=self.user, project_id=self.project, consistency="strong")
        left = [str(m.id) for m in listed if str(m.id) in self.created]
        assert not left, f"{len(left)} forgotten memories still listed"
        try:
            self.client.get_memory(self.created[0], user_id=self.user, consistency="strong")
        except NotFound:
            return "none left"
        raise AssertionError("a forgotten memory can still be read")

    def clean_up(self) -> None:
        """A failed run leaves nothing behind either."""
        for memory_id in self.stored:
            with contextlib.suppress(AgentMemoryError, OSError):
                self.client.forget_memory(memory_id, user_id=self.user)


def run_smoke(
    url: str,
    *,
    token: str | None = None,
    auth: Auth | None = None,
    user_id: str | None = None,
    region: str | None = None,
    mcp: bool = True,
    timeout: float = 30.0,
    resume_wait_s: float = 60.0,
    report: Callable[[dict[str, Any]], None] | None = None,
) -> SmokeRun:
    """Remember, recall, list, MCP, forget against ``url``; returns every check's outcome."""
    # Imported here: the HTTP client costs the other commands' start-up for nothing.
    from agent_memory_client import MemoryClient
    from agent_memory_client.calls import infer_auth

    run = SmokeRun(url)
    mode = infer_auth(url, auth, token)
    # With a token the user is its 'sub' (the API refuses any other); else this run's own user.
    user = None if mode == "jwt" else (user_id or f"agent-memory-smoke-{uuid.uuid4().hex[:8]}")
    client = MemoryClient(url, auth=mode, token=token, region=region, timeout=timeout)
    steps = _Steps(url, client, mode, token, region, timeout, resume_wait_s, user)

    def step(name: str, body: Callable[[], str]) -> bool:
        ok = run.check(name, body)
        if report:
            report(run.checks[-1])
        return ok

    try:
        if step("remember", steps.remember):
            step("recall", steps.recall)
            step("list", steps.listed)
            if mcp:
                step("mcp", steps.mcp_tools)
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

    from agent_memory_client.mcp_auth import mcp_http_client

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


def cmd_smoke(service: Memory, args: argparse.Namespace) -> int:
    del service  # the stack under test is at --url; nothing local is touched
    token: str | None = args.token
    if token == STDIN:  # a token on the command line shows in the process list
        token = sys.stdin.readline().strip()

    def line(check: dict[str, Any]) -> None:
        if not args.json:
            status = "PASS" if check["ok"] else "FAIL"
            print(f"{status}  {check['check']:<9} {check['detail']} ({check['ms']} ms)", flush=True)

    run = run_smoke(
        args.url,
        token=token or None,
        auth=args.auth,
        user_id=args.user,
        region=args.region,
        mcp=not args.no_mcp,
        timeout=args.timeout,
        report=line,
    )
    passed = sum(1 for c in run.checks if c["ok"])
    verdict = "PASS" if run.passed else "FAIL"
    if args.json:
        emit({"verdict": verdict, "url": run.url, "passed": passed, "checks": run.checks})
    else:
        print(f"smoke: {verdict} ({passed} of {len(run.checks)} checks passed) against {run.url}")
    return EXIT_OK if run.passed else EXIT_FAILED


AddCommand = Callable[[str, Callable[[Memory, argparse.Namespace], int], str], argparse.ArgumentParser]


def register(add: AddCommand) -> None:
    """Adds ``smoke`` through cli.build_parser's ``add`` helper."""
    p = add(
        "smoke",
        cmd_smoke,
        "check a deployed stack (or `agent-memory serve`) end to end: remember, recall, list, the MCP tools, "
        "forget; PASS or FAIL, exit 0 or 1",
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
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
