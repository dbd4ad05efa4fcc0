"""No import cycle anywhere in our packages, counting the imports import-linter leaves out.

The ``acyclic`` contract (pyproject.toml) reads the graph without type-checking imports
(``exclude_type_checking_imports``), so a module importing another at run time, even inside a function,
while that one imports it back for its annotations passes there. Here every import counts: in each
package, the imports that would have to go for its children to form no cycle must be none.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grimp
import pytest

SHARED = Path(__file__).resolve().parents[2] / "shared"
PACKAGES = ("rushmem", "rushmem_contract", "rushmem_client", "rushmem_tools")


def cycle_breakers(graph: grimp.ImportGraph) -> dict[str, set[tuple[str, str]]]:
    found: dict[str, set[tuple[str, str]]] = {}
    for package in sorted(m for m in graph.modules if graph.find_children(m)):
        breakers = set(graph.nominate_cycle_breakers(package))
        if breakers:
            found[package] = breakers
    return found


def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False, cache_dir=None)


def test_no_package_has_an_import_cycle() -> None:
    assert cycle_breakers(graph()) == {}


def annotation_imports() -> set[tuple[str, str]]:
    """(importer, imported) of every ``from rushmem... import`` under ``if TYPE_CHECKING:``."""
    found = set()
    for path in SHARED.joinpath("rushmem").rglob("*.py"):
        module = ".".join(path.relative_to(SHARED).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith("rushmem."):
                        found.add((module, inner.module or ""))
    return found


def test_imports_for_annotations_count() -> None:
    imports, found = graph(), annotation_imports()
    assert found  # there are some to count
    assert all(imports.direct_import_exists(importer=a, imported=b) for a, b in found), found


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        # Inside one package: transactions imports session.
        ("rushmem.store.engine.session", "rushmem.store.engine.transactions"),
        # Across subpackages (writes imports session): the cycle shows in their common parent.
        ("rushmem.store.engine.session", "rushmem.store.memories.writes"),
    ],
)
def test_a_planted_cycle_is_found(importer: str, imported: str) -> None:
    planted = graph()
    assert planted.chain_exists(importer=imported, imported=importer)
    planted.add_import(importer=importer, imported=imported)
    assert cycle_breakers(planted) != {}
