"""`rushmem bench coldstart`: what a Lambda cold start costs before the first answer.

A fresh interpreter with nothing on its path but a built layer's contents (what Lambda puts in
/opt/python), the function's folder (/var/task) and, with ``--tracing``, the boto3 the runtime
ships, imports the handler module and serves its first events/ request against a real database
(the embedded PostgreSQL; ``hash`` embeddings, so no model or provider call is timed); N fresh
interpreters per case, medians reported. Nothing is written next to the code (``-B``), as on
Lambda's read-only file system.

Cases:

- ``bytecode``: the layer as built (with the runtime's bytecode when a CPython 3.13 built it);
- ``no bytecode``: the same files with their bytecode hidden (``PYTHONPYCACHEPREFIX`` set to an
  empty folder): a layer built without it, where every cold start compiles what it imports;
- ``restored``: import, then SnapStart's hooks (the warm-up and the release before the
  snapshot, the reseed after the restore: :mod:`rushmem.lifecycle`), then the first
  request: what a container resumed from a snapshot still pays (Lambda's own restore excluded).

The layer is built for this machine's CPU by layers/memory/Makefile and for the interpreter's
Python version: CPython 3.13 (Lambda's) when one is found (``--python``, python3.13 on PATH, or
a pyenv installation), else the running interpreter's, which the output says (binary wheels
are per Python version: a cp313 layer does not load in 3.11).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rushmem.service import Memory
from rushmem_contract.errors import ConfigurationError, InvalidInput
from rushmem_contract.models import NewMemory
from rushmem_tools.bench.common import (
    ScratchServer,
    add_database_arguments,
    load_average,
    open_service,
    print_table,
    say,
)

REPO = Path(__file__).resolve().parents[3]
LAMBDA_PYTHON = (3, 13)
# What each function serves first (an events/ file) and the user whose memories a recall finds.
FUNCTIONS = {
    "RecallFunction": ("functions/recall", "events/http-recall-iam.json"),
    "IngestFunction": ("functions/ingest", "events/conversation-ended.json"),
}
RECALL_USER, RECALL_PROJECT = "user-123", "svg-editor"
# Modules whose presence after the import says what the handler pulled in.
WATCHED = ("aws_xray_sdk", "botocore", "numpy", "psycopg", "rushmem.service", "rushmem.extraction")

# Runs in the fresh interpreter: import, first request, and what it cost (to the file argv[6]).
CHILD = r"""
import importlib, json, sys, time, uuid
code, module_name, attr, event_path, mode, out = sys.argv[1:7]
watched = json.loads(sys.argv[7])
started = time.perf_counter()
module = importlib.import_module(module_name)
imported = time.perf_counter()
loaded = {name: name in sys.modules for name in watched}
hooks_ms = None
if mode == "restored":
    from rushmem import lifecycle
    t = time.perf_counter()
    lifecycle.before_snapshot()
    lifecycle.after_restore()
    hooks_ms = (time.perf_counter() - t) * 1000

class Context:
    function_name = "coldstart"
    function_version = "1"
    memory_limit_in_mb = 1024
    invoked_function_arn = "arn:aws:lambda:local:000000000000:function:coldstart"
    aws_request_id = str(uuid.uuid4())
    log_group_name = "/aws/lambda/coldstart"
    log_stream_name = "local"
    def get_remaining_time_in_millis(self):
        return 30000

with open(event_path) as f:
    event = json.load(f)
t = time.perf_counter()
result = getattr(module, attr)(event, Context())
served = time.perf_counter()
ok = result.get("statusCode") == 200 if "statusCode" in result else not result.get("batchItemFailures")
with open(out, "w") as f:
    json.dump({"import_ms": (imported - started) * 1000, "first_request_ms": (served - t) * 1000,
               "hooks_ms": hooks_ms, "ok": ok, "loaded": loaded, "modules": len(sys.modules)}, f)
"""


@dataclass
class Case:
    function: str
    mode: str  # bytecode | no bytecode | restored
    runs: list[dict[str, Any]] = field(default_factory=list)

    def median(self, key: str) -> float:
        return float(statistics.median(r[key] for r in self.runs))

    def spread(self, key: str) -> str:
        values = [r[key] for r in self.runs]
        return f"{min(values):.0f}-{max(values):.0f}"


def python_version(interpreter: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run(  # noqa: S603 - the interpreter the person running the bench chose
            [interpreter, "-S", "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except OSError:
        return None
    parts = out.stdout.split()
    return (int(parts[0]), int(parts[1])) if out.returncode == 0 and len(parts) == 2 else None


def find_interpreter(explicit: str | None) -> tuple[str, tuple[int, int]]:
    """A CPython 3.13 if there is one (explicit, python3.13 on PATH, pyenv), else this interpreter."""
    if explicit:
        version = python_version(explicit)
        if version is None:
            raise ConfigurationError(f"--python {explicit} does not run")
        return explicit, version
    candidates = [shutil.which("python3.13")]
    candidates += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.13*/bin/python3.13"))]
    for candidate in filter(None, candidates):
        if python_version(candidate) == LAMBDA_PYTHON:
            return candidate, LAMBDA_PYTHON
    return sys.executable, (sys.version_info[0], sys.version_info[1])


def build_layer(out: Path, version: tuple[int, int], interpreter: str) -> Path:
    """layers/memory/Makefile for this CPU and ``version``; its bytecode compiled by ``interpreter``."""
    architecture = {"x86_64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine())
    if architecture is None:
        raise ConfigurationError(f"Lambda has no {platform.machine()} CPU to build a layer for")
    source = REPO / "layers" / "memory"
    if not (source / "Makefile").is_file():
        raise ConfigurationError(f"no layer Makefile at {source} (run from a checkout, or pass --layer)")
    env = {
        **os.environ,
        "ARCHITECTURE": architecture,
        "ARTIFACTS_DIR": str(out),
        "PYTHON": sys.executable,
        "PYTHON_VERSION": f"{version[0]}.{version[1]}",
        "BYTECODE_PYTHON": interpreter,
    }
    say(f"coldstart: building the layer for {architecture}, CPython {version[0]}.{version[1]} (pip)")
    make = ["make", "--no-print-directory", "-s", "build-MemoryLayer"]
    subprocess.run(make, cwd=source, env=env, check=True)  # noqa: S603 - make from PATH, as `make sam-build`
    return out / "python"


def runtime_packages(out: Path, version: tuple[int, int]) -> Path:
    """boto3, as the Lambda runtime has it beside the layer (the X-Ray SDK imports botocore)."""
    say("coldstart: boto3 for the runtime's own packages (pip)")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", str(out)]
    target = ["--only-binary=:all:", "--implementation", "cp", "--python-version", f"{version[0]}.{version[1]}"]
    subprocess.run([*pip, *target, "boto3"], check=True)  # noqa: S603 - pip of this interpreter
    return out


def seed(service: Memory) -> None:
    """Memories for the recall event's user, so the first recall ranks real rows."""
    facts = [
        "The user prefers pnpm over npm for the SVG editor.",
        "The SVG editor is written in TypeScript with React.",
        "Every SVG change must be synced to the defaultSVG variable.",
        "The user deploys the editor with Vite.",
    ]
    service.add([NewMemory(content=f) for f in facts], user_id=RECALL_USER, project_id=RECALL_PROJECT)


def one_run(
    interpreter: str,
    function: str,
    mode: str,
    *,
    layer: Path,
    runtime: Path | None,
    scratch: Path,
    env: dict[str, str],
    index: int,
) -> dict[str, Any]:
    code_rel, event_rel = FUNCTIONS[function]
    # The function's folder as Lambda has it (/var/task): a copy, without bytecode.
    code = scratch / f"task-{function}"
    if not code.exists():
        shutil.copytree(REPO / code_rel, code, ignore=shutil.ignore_patterns("__pycache__"))
    event = json.loads((REPO / event_rel).read_text())
    if function == "IngestFunction":  # a message never written before, so the write path runs in full
        for record in event["Records"]:
            body = json.loads(record["body"])
            body["user_id"] = f"coldstart-{index}-{mode.replace(' ', '-')}"
            record["body"] = json.dumps(body)
    event_path = scratch / "event.json"
    event_path.write_text(json.dumps(event))
    out = scratch / "result.json"
    out.unlink(missing_ok=True)
    child_env = {**env, "PYTHONPATH": os.pathsep.join(str(p) for p in (code, layer, runtime) if p is not None)}
    if mode == "no bytecode":
        empty = scratch / "no-bytecode"
        shutil.rmtree(empty, ignore_errors=True)
        empty.mkdir()
        child_env["PYTHONPYCACHEPREFIX"] = str(empty)  # bytecode is looked for there: none
    argv = [interpreter, "-S", "-B", "-c", CHILD, str(code), "app", "lambda_handler", str(event_path), mode, str(out)]
    done = subprocess.run(  # noqa: S603 - the chosen interpreter on our own script
        [*argv, json.dumps(WATCHED)],
        env=child_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0 or not out.is_file():
        raise ConfigurationError(f"{function} ({mode}) failed in the fresh interpreter:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    if not result["ok"]:
        raise ConfigurationError(f"{function} ({mode}) answered with an error:\n{done.stderr[-2000:]}")
    return result


def run(service: Memory, args: argparse.Namespace) -> int:
    if not 1 <= args.runs <= 200:
        raise InvalidInput("--runs must be between 1 and 200", field="runs")
    interpreter, version = find_interpreter(args.python)
    scratch = Path(tempfile.mkdtemp(prefix="agent-memory-coldstart-"))
    try:
        if args.layer:
            layer = Path(args.layer)
            layer = layer / "python" if (layer / "python").is_dir() else layer
            built = layer / "rushmem_layer.json"
            if built.is_file():
                wanted = json.loads(built.read_text()).get("python", "")
                if wanted != f"{version[0]}.{version[1]}":
                    raise ConfigurationError(f"the layer is for CPython {wanted}; the interpreter is {version}")
        else:
            layer = build_layer(scratch / "layer", version, interpreter)
        runtime = runtime_packages(scratch / "runtime", version) if args.tracing else None
        with ScratchServer.from_args(args) as server:
            database = server.describe()
            url = server.new_database("coldstart")
            bench = open_service(service.settings, url, provider="hash")
            try:
                seed(bench)
            finally:
                bench.close()
            env = lambda_environment(url, tracing=args.tracing, task_root=scratch)
            modes = ["bytecode", "no bytecode", "restored"]
            cases = {(f, m): Case(f, m) for f in FUNCTIONS for m in modes}
            load_before = load_average()
            say(f"coldstart: {args.runs} fresh interpreters per case ({len(cases)} cases), interleaved")
            for index in range(args.runs):
                for (function, mode), case in cases.items():
                    case.runs.append(
                        one_run(
                            interpreter,
                            function,
                            mode,
                            layer=layer,
                            runtime=runtime,
                            scratch=scratch,
                            env=env,
                            index=index,
                        )
                    )
            load_after = load_average()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    _report(args, interpreter, version, layer, database, load_before, load_after, cases)
    return 0


def lambda_environment(url: str, *, tracing: bool, task_root: Path) -> dict[str, str]:
    """The functions' environment: the template's POWERTOOLS_* values, a database, hash embeddings."""
    from rushmem_tools.local.runtime import function_spec

    spec = function_spec(REPO / "template.yaml", "RecallFunction")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "PYTHONNOUSERSITE": "1",
        **spec.environment,
        "AWS_LAMBDA_FUNCTION_NAME": "coldstart",
        "AWS_REGION": "us-east-1",
        "RUSHMEM_DATABASE_URL": url,
        "RUSHMEM_EMBEDDING_PROVIDER": "hash",
        "RUSHMEM_DB_ROLE": "agent_memory_app",
        "POWERTOOLS_TRACE_DISABLED": "false" if tracing else "true",
    }
    if tracing:
        # As in Lambda with active tracing; no daemon listens, the SDK only logs what it would send.
        env.update(LAMBDA_TASK_ROOT=str(task_root), AWS_XRAY_CONTEXT_MISSING="IGNORE_ERROR")
        env["_X_AMZN_TRACE_ID"] = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0"
    return env


def _report(
    args: argparse.Namespace,
    interpreter: str,
    version: tuple[int, int],
    layer: Path,
    database: str,
    load_before: str,
    load_after: str,
    cases: dict[tuple[str, str], Case],
) -> None:
    print(f"interpreter: {interpreter} (CPython {version[0]}.{version[1]}), -S -B, fresh per run")
    if version != LAMBDA_PYTHON:
        print(
            f"NOTE: no CPython 3.13 found: the layer was built for {version[0]}.{version[1]} (binary wheels are per "
            "version); Lambda runs 3.13, whose imports are faster"
        )
    print(f"layer: {layer} ({'as given' if args.layer else 'built for this run'})")
    print(f"database: {database}; tracing {'on (X-Ray SDK)' if args.tracing else 'off'}")
    print(f"machine: {load_before} before, {load_after} after")
    rows = []
    for (function, mode), case in cases.items():
        loaded = [name for name, present in case.runs[0]["loaded"].items() if present]
        rows.append(
            [
                function,
                mode,
                len(case.runs),
                f"{case.median('import_ms'):.0f}",
                case.spread("import_ms"),
                f"{case.median('first_request_ms'):.0f}",
                case.spread("first_request_ms"),
                f"{statistics.median(r['hooks_ms'] for r in case.runs):.0f}" if mode == "restored" else "",
                ", ".join(loaded) or "-",
            ]
        )
    print_table(
        [
            "function",
            "case",
            "runs",
            "import ms",
            "range",
            "first request ms",
            "range",
            "snapshot hooks ms",
            "imported by the handler module",
        ],
        rows,
    )

    def med(function: str, mode: str, key: str) -> str:
        return f"{cases[(function, mode)].median(key):.0f}"

    print(
        f"coldstart runs={args.runs} python={version[0]}.{version[1]} tracing={'on' if args.tracing else 'off'} "
        f"recall_import_ms={med('RecallFunction', 'bytecode', 'import_ms')} "
        f"ingest_import_ms={med('IngestFunction', 'bytecode', 'import_ms')} "
        f"recall_first_request_ms={med('RecallFunction', 'bytecode', 'first_request_ms')} "
        f"ingest_first_request_ms={med('IngestFunction', 'bytecode', 'first_request_ms')} "
        f"recall_import_no_bytecode_ms={med('RecallFunction', 'no bytecode', 'import_ms')} "
        f"recall_restored_first_request_ms={med('RecallFunction', 'restored', 'first_request_ms')}"
    )


def register(sub: Any) -> None:
    p = sub.add_parser(
        "coldstart",
        help="handler import and first-request time in fresh interpreters on the built layer",
        description="Build the Lambda layer for this CPU (or take --layer), then in N fresh interpreters import "
        "RecallFunction's and IngestFunction's handlers and serve their first events/ request on a scratch "
        "database: with the layer's bytecode, without it, and after SnapStart's hooks. Medians.",
    )
    p.add_argument("--runs", type=int, default=10, help="fresh interpreters per case (default 10)")
    p.add_argument("--python", help="the interpreter (default: a CPython 3.13, else this one)")
    p.add_argument("--layer", help="a built layer (its python/ folder or the folder holding it) instead of a build")
    p.add_argument("--tracing", action="store_true", help="as with the template's Tracing=Active (the X-Ray SDK)")
    add_database_arguments(p)
    p.set_defaults(func=run)
