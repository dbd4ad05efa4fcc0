"""Each operation's parameters are defined once, as fields of its request model
(:mod:`.schemas`); the other doors take a field's limits and description from there with
:func:`param`, rather than restating them. A test (tests/unit/test_doors.py) checks every door's
parameters against the models, so a door cannot drift.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, Field

F = TypeVar("F", bound=Callable[..., Any])

_BOUNDS = ("gt", "ge", "lt", "le", "min_length", "max_length")


def bounds(model: type[BaseModel], name: str) -> dict[str, Any]:
    """The numeric and length bounds of ``model``'s field ``name`` ({"ge": 1, "le": 50})."""
    found: dict[str, Any] = {}
    for item in model.model_fields[name].metadata:
        for attr in _BOUNDS:
            value = getattr(item, attr, None)
            if value is not None:
                found[attr] = value
    return found


def param(model: type[BaseModel], name: str, description: str | None = None) -> Any:
    """A parameter of another door (an MCP tool's argument) with the bounds and the description of
    ``model``'s field ``name``, for ``Annotated[T, param(...)]``; its default stays the door's own
    (written ``= ...``), and :func:`default` reads the model's."""
    return Field(description=description or model.model_fields[name].description, **bounds(model, name))


def default(model: type[BaseModel], name: str) -> Any:
    """The default of ``model``'s field ``name``."""
    return model.model_fields[name].get_default(call_default_factory=True)


def spread(model: type[BaseModel], annotation: Callable[[str], Any]) -> Callable[[F], F]:
    """A door that takes ``model``'s fields as separate parameters (GET /memories' query, an MCP
    tool's arguments): the decorated function's ``**kwargs`` is shown to the framework that reads
    its signature as one keyword parameter per field, ``annotation(name)`` each, default None, so
    a new field reaches the door with nothing written there."""

    def decorate(fn: F) -> F:
        signature = inspect.signature(fn, eval_str=True)
        own = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        fields = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation(name))
            for name in model.model_fields
        ]
        fn.__signature__ = signature.replace(parameters=[*own, *fields])  # type: ignore[attr-defined]
        return fn

    return decorate
