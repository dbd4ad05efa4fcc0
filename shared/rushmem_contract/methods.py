"""Every operation of the table as a Python method, from one definition for the three Python doors:
the in-process :class:`rushmem.Memory`, :class:`rushmem_client.MemoryClient` and
:class:`rushmem_client.AsyncMemoryClient` all inherit :class:`Operations`, and differ only in how
they run a request (``invoke``: the dispatcher in-process, an HTTP call, an awaited HTTP call).

A method takes the request's fields (the first ones positionally, as the row's ``positional``
names them) or the request model itself, and builds the request as every door builds it
(:meth:`~rushmem_contract.operations.Operation.build`): the same accepted inputs, the same refusals.
Names follow mem0's where it has the verb (``search``, ``get_all``, ``update``, ``delete``, ``history``,
``delete_all``); docs/api.md, "Coming from mem0", maps the rest.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Generic, Protocol, overload

from rushmem_contract import operations as ops
from rushmem_contract.operations import Operation, Req, Res


class AsyncDoor(Protocol):
    def invoke(self, op: Operation[Req, Res], request: Req, **options: Any) -> Awaitable[Res]: ...


class SyncDoor(Protocol):
    def invoke(self, op: Operation[Req, Res], request: Req, **options: Any) -> Res: ...


class Method(Generic[Req, Res]):
    """A row of the table as a method (see the module's docstring). Keywords a door takes besides
    the request's fields (its ``OPTIONS``: the in-process service's ``source``, ...) go to its
    ``invoke``; any other unknown keyword is refused by the request model, naming it."""

    def __init__(self, op: Operation[Req, Res]) -> None:
        self.op = op
        self.__doc__ = op.summary
        self.signature = signature(op)

        # On the class (``Memory.recall``): a plain function of the door, as a method is, so that
        # help(), inspect.signature() and IDEs show the fields.
        def unbound(door: Any, /, *args: Any, **kwargs: Any) -> Any:
            return self.bind(door)(*args, **kwargs)

        unbound.__name__ = unbound.__qualname__ = op.name
        unbound.__doc__ = op.summary
        door = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
        unbound.__signature__ = self.signature.replace(  # type: ignore[attr-defined]
            parameters=[door, *self.signature.parameters.values()]
        )
        self.unbound = unbound

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Callable[..., Any]: ...
    @overload
    def __get__(self, obj: AsyncDoor, owner: type[Any]) -> Callable[..., Awaitable[Res]]: ...
    @overload
    def __get__(self, obj: SyncDoor, owner: type[Any]) -> Callable[..., Res]: ...
    def __get__(self, obj: Any, owner: type[Any]) -> Any:
        return self.unbound if obj is None else self.bind(obj)

    def bind(self, obj: Any) -> Callable[..., Any]:
        """The method of one door (an instance)."""
        op = self.op
        allowed: frozenset[str] = getattr(obj, "OPTIONS", frozenset())

        def call(*args: Any, **kwargs: Any) -> Any:
            options = {k: kwargs.pop(k) for k in list(kwargs) if k in allowed and k not in op.request.model_fields}
            return obj.invoke(op, op.build(*args, **kwargs), **options)

        call.__name__ = op.name
        call.__doc__ = op.summary
        call.__signature__ = self.signature  # type: ignore[attr-defined]  # what help() and IDEs show
        return call


def signature(op: Operation[Any, Any]) -> inspect.Signature:
    """A method's parameters as its row says: the positional ones first, then every other field of
    the request as a keyword, with the model's defaults; the answer the row's response."""
    fields = op.request.model_fields
    params: list[inspect.Parameter] = []
    for name in op.positional:
        field = fields.get(name)
        default = None if field is None or not field.is_required() else inspect.Parameter.empty
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default))
    for name, field in fields.items():
        if name in op.positional:
            continue
        default = inspect.Parameter.empty if field.is_required() else field.get_default(call_default_factory=True)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default))
    return inspect.Signature(params, return_annotation=op.response.__name__ if op.response else "None")


class Operations:
    """The operations as methods (see the module's docstring); a test checks every row is here."""

    OPTIONS: ClassVar[frozenset[str]] = frozenset()

    recall = Method(ops.RECALL)
    search = recall  # mem0's word
    add = Method(ops.ADD)
    list = Method(ops.LIST)
    get_all = list  # mem0's word
    get = Method(ops.GET)
    update = Method(ops.UPDATE)
    delete = Method(ops.DELETE)
    history = Method(ops.HISTORY)
    export = Method(ops.EXPORT)
    forget_user = Method(ops.FORGET_USER)
    delete_all = forget_user  # mem0's word (delete_all(user_id=)): an erasure, with its receipt
    ingest_conversation = Method(ops.INGEST)
    pending = Method(ops.PENDING)
    review = Method(ops.REVIEW)
    users = Method(ops.USERS)
    usage = Method(ops.USAGE)
    erasure = Method(ops.ERASURE)
    erasures = Method(ops.ERASURES)
    get_instructions = Method(ops.GET_INSTRUCTIONS)
    set_instructions = Method(ops.SET_INSTRUCTIONS)
    instructions_history = Method(ops.INSTRUCTIONS_HISTORY)
