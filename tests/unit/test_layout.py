"""The handlers are thin: they import the service, the HTTP API's shared parts, the models and the
one Logger/Tracer/Metrics, never a step of the data path, the database or a provider.

(import-linter checks the package itself; the handlers are modules named ``app`` outside it.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HANDLERS = sorted((REPO / "functions").glob("*/app.py"))
# What a handler may import from the package (a module, or a module under a package here); mcp is
# the MCP door's adapter (RecallFunction's /mcp), a surface like http; lifecycle: the service
# imported on first use, and SnapStart's hooks.
ALLOWED = ("service", "lifecycle", "http", "mcp", "observability", "config", "__init__", "__version__")


def allowed(module: str) -> bool:
    """The wire contract (models, errors) is the API surface too."""
    top, _, rest = module.partition(".")
    return top == "agent_memory_contract" or (top == "agent_memory" and (not rest or rest.split(".")[0] in ALLOWED))


def package_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("agent_memory"):
            if node.module == "agent_memory":
                found.update(f"agent_memory.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("agent_memory"))
    return found


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
