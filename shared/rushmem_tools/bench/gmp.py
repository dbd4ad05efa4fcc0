"""`rushmem bench gmp`: GRAFOMEM's GMP conformance suite, run over the HTTP API.

GRAFOMEM (``pip install grafomem``, MIT) is a third-party memory benchmark whose conformance
suite decides whether a store *supports* a capability by running it, not by reading its claims:
AUDIT (everything written can be listed), SUPERSESSION_CHAIN (a superseded version never comes
back as current), BI_TEMPORAL (``as_of`` answers with the version valid then), HARD_DELETE (a
deleted memory is gone from every read), MULTI_TENANT (no user sees another's memories),
PROVENANCE (each memory names the write that made it) and POINT_LOOKUP.

:class:`HttpMemoryStore` is the adapter: GRAFOMEM's ``MemoryBackend`` protocol over the
documented HTTP routes only (POST /memories, POST /recall, GET /memories/export, GET and
DELETE /memories/{id}), so what it measures is what any API caller gets. A GRAFOMEM tenant is a
user; each store the suite asks for is a fresh set of users. Without ``--url`` the command
serves the API itself on a scratch database (the hash embedder unless told otherwise).

The last line: ``gmp seeds=... <capability>=pass|fail ... violations=N``; the exit status is 1
when any declared capability fails.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import httpx

from rushmem_contract.errors import ConfigurationError

# What the adapter declares; the suite tests each of them (and only them).
CAPABILITIES = (
    "audit",
    "supersession_chain",
    "bi_temporal",
    "hard_delete",
    "multi_tenant",
    "provenance",
    "point_lookup",
)


def _aml() -> Any:
    try:
        from aml.backends import interface
    except ImportError as exc:  # an optional benchmark dependency
        raise ConfigurationError(
            "bench gmp needs GRAFOMEM: pip install 'grafomem==0.4.2' (or the project's dev extra)"
        ) from exc
    return interface


def _check(answer: httpx.Response) -> None:
    """An answer the suite cannot use stops the run, naming the request and the API's error."""
    if answer.is_error:
        request = answer.request
        raise RuntimeError(f"{request.method} {request.url.path}: {answer.status_code} {answer.text[:300]}")


def _time(value: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(value) if value else None


class HttpMemoryStore:
    """GRAFOMEM's ``MemoryBackend`` over the HTTP API. A ref is ``(user_id, memory id)``."""

    __grafomem_interface__ = "0.1.1"
    __grafomem_adapter_metadata__: ClassVar[dict[str, str]] = {
        "name": "agent-memory",
        "transport": "HTTP API (POST /memories, POST /recall, GET /memories/export, GET/DELETE /memories/{id})",
    }

    def __init__(self, api_url: str, http: httpx.Client, *, limit: int = 10) -> None:
        self._api = api_url.rstrip("/")
        self._http = http
        self._limit = limit
        self._prefix = f"gmp-{uuid.uuid4().hex[:10]}"
        self._users: set[str] = set()
        self._aml = _aml()

    # ---- the protocol --------------------------------------------------------------------

    def capabilities(self) -> set[Any]:
        return {self._aml.Capability(name) for name in CAPABILITIES}

    def write(self, content: str, options: Any) -> tuple[str, str]:
        return self._add(self._user(options.tenant_id), content, options, supersedes=None)

    def supersede(self, old_ref: tuple[str, str], content: str, options: Any) -> tuple[str, str]:
        user, old_id = old_ref
        return self._add(user, content, options, supersedes=old_id)

    def delete(self, ref: tuple[str, str]) -> bool:
        user, memory_id = ref
        answer = self._http.delete(f"{self._api}/memories/{memory_id}", params={"user_id": user})
        if answer.status_code == 404:
            return False
        _check(answer)
        return True

    def exists(self, ref: tuple[str, str]) -> bool:
        user, memory_id = ref
        answer = self._http.get(f"{self._api}/memories/{memory_id}", params={"user_id": user})
        if answer.status_code == 404:
            return False
        _check(answer)
        return True

    def retrieve(self, query: str, options: Any) -> list[Any]:
        user = self._user(options.tenant_id)
        body: dict[str, Any] = {"user_id": user, "query": query, "limit": self._limit}
        if options.as_of is not None:
            body["as_of"] = options.as_of.isoformat()
        answer = self._http.post(f"{self._api}/recall", json=body)
        _check(answer)
        found, used = [], 0
        for item in answer.json()["memories"]:
            if used + len(item["content"]) > options.budget_tokens:
                break  # the suite's budget is characters; the tail is dropped
            used += len(item["content"])
            found.append(self._memory(user, item))
        return found

    def audit(self) -> Iterator[Any]:
        memories = []
        for user in sorted(self._users):
            cursor: str | None = None
            while True:
                params: dict[str, str | int] = {"user_id": user, "limit": 500}
                if cursor:
                    params["cursor"] = cursor
                answer = self._http.get(f"{self._api}/memories/export", params=params)
                _check(answer)
                page = answer.json()
                memories += [self._memory(user, line) for line in page["lines"]]
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        return iter(memories)

    def flush(self) -> None:
        """Writes are committed when POST /memories answers: nothing to wait for."""

    # ---- helpers -------------------------------------------------------------------------

    def _user(self, tenant: str | None) -> str:
        user = f"{self._prefix}-{tenant or 'default'}"
        self._users.add(user)
        return user

    def _add(self, user: str, content: str, options: Any, *, supersedes: str | None) -> tuple[str, str]:
        memory: dict[str, Any] = {"content": content}
        if options.metadata:
            memory["metadata"] = {str(k): str(v) for k, v in options.metadata.items()}
        if options.valid_from is not None:
            memory["valid_from"] = options.valid_from.isoformat()
        if supersedes is not None:
            memory["supersedes"] = [supersedes]
        answer = self._http.post(f"{self._api}/memories", json={"user_id": user, "memories": [memory]})
        _check(answer)
        return user, str(answer.json()["ids"][0])

    def _memory(self, user: str, item: dict[str, Any]) -> Any:
        aml = self._aml
        written_at = _time(item.get("created_at")) or dt.datetime.now(dt.UTC)
        write_id = item.get("write_id")
        superseded_by = item.get("superseded_by")
        return aml.Memory(
            ref=(user, str(item["id"])),
            content=item["content"],
            written_at=written_at,
            metadata=dict(item.get("metadata") or {}),
            valid_from=_time(item.get("valid_from")),
            valid_until=_time(item.get("valid_until")),
            tenant_id=user.removeprefix(f"{self._prefix}-"),
            superseded_by=(user, str(superseded_by)) if superseded_by else None,
            source=aml.SourceMeta(write_id=str(write_id), written_at=written_at) if write_id else None,
        )


def run(api_url: str, *, seeds: int, token: str | None = None) -> Any:
    """The conformance profile of the API at ``api_url`` (GRAFOMEM's ``ConformanceProfile``)."""
    _aml()
    from aml.eval.conformance import run_conformance

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(timeout=30.0, headers=headers) as http:
        return run_conformance(lambda: HttpMemoryStore(api_url, http), name="agent-memory", seeds=range(seeds))


def summary(profile: Any, seeds: int) -> str:
    verdicts = {r.capability.value: "pass" if r.passed else "fail" for r in profile.results}
    parts = [f"{name}={verdicts.get(name, 'untested')}" for name in CAPABILITIES]
    return f"gmp seeds={seeds} {' '.join(parts)} violations={len(profile.violations)}"


@contextlib.contextmanager
def _local_api(args: argparse.Namespace) -> Iterator[str]:
    """The HTTP API of `rushmem serve`, in this process, on a scratch database."""
    from rushmem.config import get_settings
    from rushmem.service import set_service
    from rushmem_tools.bench.common import ScratchServer, open_service
    from rushmem_tools.local.server import LocalApi, make_server
    from rushmem_tools.local.stack import template_path

    with ScratchServer.from_args(args) as server:
        url = server.new_database("gmp")
        service = open_service(get_settings(), url, provider=args.embedding_provider)
        set_service(service)
        api = LocalApi(template_path(None))
        api.load()
        httpd = make_server(api, "127.0.0.1", 0)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        try:
            yield f"http://127.0.0.1:{httpd.server_port}"
        finally:
            httpd.shutdown()
            httpd.server_close()
            service.close()
            server.drop_database(url)


def cmd_gmp(service: Any, args: argparse.Namespace) -> int:
    from aml.eval.conformance import print_profile

    local: Callable[[], contextlib.AbstractContextManager[str]] = lambda: _local_api(args)  # noqa: E731
    with contextlib.nullcontext(args.url) if args.url else local() as api_url:
        profile = run(api_url, seeds=args.seeds, token=args.token)
    print_profile(profile)
    print(summary(profile, args.seeds))
    return 1 if profile.violations else 0


def register(benches: Any) -> None:
    from rushmem_tools.bench.common import add_database_arguments

    p = benches.add_parser(
        "gmp",
        help="GRAFOMEM's GMP conformance suite over the HTTP API",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("--url", help="an API to test (default: serve one here on a scratch database)")
    p.add_argument("--token", help="a bearer token for --url (JWT auth)")
    p.add_argument("--seeds", type=int, default=5, help="traces per workload (default 5, as the suite)")
    p.add_argument(
        "--embedding-provider", default="hash", help="embedder of the local API (default hash; 'local' for the model)"
    )
    add_database_arguments(p)
    p.set_defaults(func=cmd_gmp)
