"""Run the real Lambda handlers from template.yaml in-process: the Docker-free ``sam local invoke``.

Reads the function's CodeUri and Handler (and Globals) from the SAM template, imports the
handler module the way the Python runtime does, and calls it with an event and a
Lambda-like context. Used by ``rushmem invoke``, ``rushmem serve`` and the tests,
so all three exercise exactly what is deployed.

Settings (RUSHMEM_*) come from the caller's environment, as with
``sam local invoke --env-vars``; from the template only the POWERTOOLS_* variables apply,
because the deployed RUSHMEM_* values point at AWS resources.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.util
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from rushmem_contract.errors import ConfigurationError

# The handlers' JSON logs below WARNING and their metrics (EMF lines), which would drown a person's
# console (`demo`, `serve` on a terminal); a variable already set wins.
QUIET_HANDLERS = {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"}

SERVERLESS_FUNCTION = "AWS::Serverless::Function"
SERVERLESS_LAYER = "AWS::Serverless::LayerVersion"


def _cfn_loader() -> type:
    """A YAML loader that accepts CloudFormation's short tags (!Ref, !Sub, !GetAtt, ...)."""
    import yaml

    class Loader(yaml.SafeLoader):  # type: ignore[misc]
        pass

    def construct(loader: yaml.SafeLoader, tag_suffix: str, node: yaml.Node) -> dict[str, Any]:
        name = "Ref" if tag_suffix == "Ref" else f"Fn::{tag_suffix}"
        if isinstance(node, yaml.ScalarNode):
            value: Any = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
        return {name: value}

    Loader.add_multi_constructor("!", construct)
    return Loader


def load_template(path: Path) -> dict[str, Any]:
    import yaml

    if not path.exists():
        raise ConfigurationError(f"no SAM template at {path}")
    with path.open(encoding="utf-8") as handle:
        data = yaml.load(handle, Loader=_cfn_loader())  # noqa: S506 - SafeLoader subclass
    if not isinstance(data, dict) or "Resources" not in data:
        raise ConfigurationError(f"{path} is not a SAM template (no Resources)")
    return data


def _plain(value: Any, parameters: dict[str, Any]) -> Any:
    """Resolve the intrinsics a local run can resolve: !Ref to a parameter's Default."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return parameters.get(value["Ref"], {}).get("Default")
    return value


@dataclasses.dataclass(frozen=True)
class FunctionSpec:
    logical_id: str
    code_dir: Path
    module: str
    handler: str
    timeout_s: int
    memory_mb: int
    environment: dict[str, str]
    layer_paths: list[Path]


def function_spec(template_path: Path, logical_id: str) -> FunctionSpec:
    """What Lambda would run for ``logical_id``, read from the template (parsed once while the
    file is unchanged: parsing the YAML costs ~40 ms, more than most invocations)."""
    try:
        stat = template_path.stat()
    except OSError:
        return _function_spec(template_path, logical_id)  # load_template says what is wrong
    return _cached_spec(template_path.resolve(), stat.st_mtime_ns, stat.st_size, logical_id)


@functools.lru_cache(maxsize=32)
def _cached_spec(template_path: Path, mtime_ns: int, size: int, logical_id: str) -> FunctionSpec:
    return _function_spec(template_path, logical_id)


def _function_spec(template_path: Path, logical_id: str) -> FunctionSpec:
    template = load_template(template_path)
    resources = template["Resources"]
    parameters = template.get("Parameters", {}) or {}
    functions = sorted(k for k, v in resources.items() if v.get("Type") == SERVERLESS_FUNCTION)
    resource = resources.get(logical_id)
    if resource is None or resource.get("Type") != SERVERLESS_FUNCTION:
        raise ConfigurationError(
            f"{logical_id!r} is not a function in {template_path.name}; functions: {', '.join(functions) or 'none'}"
        )
    globals_ = (template.get("Globals") or {}).get("Function", {}) or {}
    props = {**globals_, **(resource.get("Properties") or {})}
    base = template_path.parent
    code_uri, handler = _plain(props.get("CodeUri"), parameters), _plain(props.get("Handler"), parameters)
    if not isinstance(code_uri, str) or not isinstance(handler, str) or "." not in handler:
        raise ConfigurationError(f"{logical_id} needs a local CodeUri and a Handler like app.lambda_handler")
    module, _, attr = handler.rpartition(".")
    env: dict[str, str] = {}
    for source in (globals_, resource.get("Properties") or {}):
        variables = ((source.get("Environment") or {}).get("Variables")) or {}
        for key, value in variables.items():
            resolved = _plain(value, parameters)
            if key.startswith("POWERTOOLS_") and isinstance(resolved, str | int | float | bool):
                env[key] = str(resolved)
    layers = []
    for ref in props.get("Layers") or []:
        name = ref.get("Ref") if isinstance(ref, dict) else None
        layer = resources.get(name or "", {})
        if layer.get("Type") == SERVERLESS_LAYER:
            layers.append(_layer_source(base, layer))
    return FunctionSpec(
        logical_id=logical_id,
        code_dir=(base / code_uri).resolve(),
        module=module,
        handler=attr,
        timeout_s=int(_plain(props.get("Timeout"), parameters) or 3),
        memory_mb=int(_plain(props.get("MemorySize"), parameters) or 128),
        environment=env,
        layer_paths=layers,
    )


def _layer_source(base: Path, layer: dict[str, Any]) -> Path:
    """Where the layer's Python code lives before it is built.

    A prebuilt layer directory has it under ``python/``; our layer is built by a Makefile
    from the repository's ``shared/`` folder (the rushmem package).
    """
    content = base / str((layer.get("Properties") or {}).get("ContentUri", ""))
    if (content / "python").is_dir():
        return (content / "python").resolve()
    return (base / "shared").resolve()


class LambdaContext:
    """The attributes handlers and Powertools read from the real context."""

    def __init__(self, spec: FunctionSpec) -> None:
        self.function_name = spec.logical_id
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = spec.memory_mb
        self.invoked_function_arn = f"arn:aws:lambda:local:000000000000:function:{spec.logical_id}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{spec.logical_id}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + spec.timeout_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


_MODULES: dict[tuple[Path, str], ModuleType] = {}


def load_module(spec: FunctionSpec) -> ModuleType:
    """Import the handler module once per process, like a warm Lambda container."""
    key = (spec.code_dir, spec.module)
    module = _MODULES.get(key)
    if module is None:
        path = spec.code_dir / (spec.module.replace(".", "/") + ".py")
        if not path.exists():
            raise ConfigurationError(f"{spec.logical_id}: handler module {path} does not exist")
        for layer in spec.layer_paths:
            # An installed package has no layer source beside the template: the layer's packages are installed.
            if layer.is_dir() and str(layer) not in sys.path:
                sys.path.append(str(layer))
        name = f"_lambda_{spec.logical_id}_{spec.module}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise ConfigurationError(f"cannot import {path}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
        _MODULES[key] = module
    return module


def load_handler(spec: FunctionSpec) -> Callable[[dict[str, Any], Any], Any]:
    handler = getattr(load_module(spec), spec.handler, None)
    if not callable(handler):
        raise ConfigurationError(f"{spec.logical_id}: {spec.module}.py has no function {spec.handler}")
    return handler  # type: ignore[no-any-return]


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update({k: v for k, v in values.items() if k not in os.environ})  # the caller's env wins
    try:
        yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


def invoke(template_path: Path, logical_id: str, event: dict[str, Any]) -> Any:
    """Invoke a function of the template in-process and return what its handler returns.

    Anything the handler prints (Powertools writes logs to stdout) goes to stderr, so
    stdout stays free for the result.
    """
    return invoke_spec(function_spec(template_path, logical_id), event)


def invoke_spec(spec: FunctionSpec, event: dict[str, Any]) -> Any:
    """:func:`invoke` for a spec already read (``rushmem serve`` reads the template once)."""
    with _environment(spec.environment), contextlib.redirect_stdout(sys.stderr):
        handler = load_handler(spec)
        return handler(event, LambdaContext(spec))


def read_event(path: Path) -> dict[str, Any]:
    try:
        event = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigurationError(f"no event file {path}") from exc
    except ValueError as exc:
        raise ConfigurationError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(event, dict):
        raise ConfigurationError(f"{path} must hold a JSON object (a Lambda event)")
    return event
