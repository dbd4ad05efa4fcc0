"""Each operation's parameters are defined once, as fields of its request model
(:mod:`.schemas`); the other doors take a field's limits and description from there with
:func:`param`, rather than restating them. A test (tests/unit/test_doors.py) checks every door's
parameters against the models, so a door cannot drift.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

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
