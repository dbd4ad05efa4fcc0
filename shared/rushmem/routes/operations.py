"""Every operation of the contract's table (:mod:`rushmem_contract.operations`) as an HTTP route,
registered in one loop: the caller and the service are Powertools dependencies, the request is
read from the path, the query string and the JSON body the way the clients write it
(:meth:`~rushmem_contract.operations.Operation.from_http`), and the route is its one service call.

Each route's signature is made from its row, for the resolver's validation and the OpenAPI
document: path parameters, the query parameters (a nested model's fields flattened, a list
comma-separated and an object as JSON, as strings), or the body's model. What a route does besides
its call is only recall's metrics.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.event_handler.depends import Depends
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel, create_model

from rushmem.http.identity import jwt_claims
from rushmem.lifecycle import get_service
from rushmem.observability import logger, metrics
from rushmem.routes.request import iam_arn
from rushmem_contract import operations as ops
from rushmem_contract import schemas
from rushmem_contract.operations import MAX_QUERY_TEXT, Operation, value_kind

if TYPE_CHECKING:
    from rushmem.service import Caller, Memory

router = Router()


def current_caller() -> Caller:
    """The request's caller: the JWT's user, or a trusted (IAM-signed, local) backend."""
    from rushmem.service import Caller

    event = router.current_event
    return Caller.for_request(jwt_claims(event.raw_event), iam_arn=iam_arn(router))


def _recall_metrics(user_id: str | None, result: Any, started: float) -> None:
    """RecallFunction's own metrics: latency, memories returned, empty recalls; and its log line."""
    elapsed_ms = (time.perf_counter() - started) * 1000
    metrics.add_metric(name="RecallLatency", unit=MetricUnit.Milliseconds, value=elapsed_ms)
    metrics.add_metric(name="MemoriesReturned", unit=MetricUnit.Count, value=len(result.memories))
    metrics.add_metric(name="EmptyRecalls", unit=MetricUnit.Count, value=0 if result.memories else 1)
    logger.info("recalled", extra={"user_id": user_id, "memories": len(result.memories), "ms": round(elapsed_ms, 1)})


def _keyword(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _query_parameters(
    model: type[BaseModel], names: tuple[str, ...], *, nested_in: str | None = None
) -> list[inspect.Parameter]:
    """The query parameters of ``names`` (a nested model's fields in its place), typed for the
    document: a list or an object as the string it travels as. A nested model's fields are checked
    by the request model alone, as text here, so that a refusal names them where the model has
    them (``filters.created_after``) at every door."""
    found: list[inspect.Parameter] = []
    for name in names:
        field = model.model_fields[name]
        annotation = field.annotation
        nested = ops.nested_model(field)
        if nested is not None:
            found += _query_parameters(nested, tuple(nested.model_fields), nested_in=name)
            continue
        kind = value_kind(annotation)
        description = field.description or ""
        if kind == "list":
            description += " Comma-separated."
        if nested_in is not None:
            # Its ceiling (a list's or an object's) is the decoder's, which names filters.x.
            limit = {"maxLength": MAX_QUERY_TEXT[kind]} if kind in MAX_QUERY_TEXT else None
            param = Query(alias=field.alias, description=description, json_schema_extra=limit)
            annotation = str | None
        elif kind in MAX_QUERY_TEXT:
            param = Query(alias=field.alias, max_length=MAX_QUERY_TEXT[kind], description=description)
            annotation = str | None
        else:
            param = Query(alias=field.alias, description=description, **_bounds(field))
        default = None if field.is_required() else field.get_default(call_default_factory=True)
        found.append(_keyword(name, Annotated[annotation, param], default))
    return found


def _bounds(field: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for item in field.metadata:
        for attr in ("gt", "ge", "lt", "le", "min_length", "max_length"):
            value = getattr(item, attr, None)
            if value is not None:
                found[attr] = value
    return found


def body_model(op: Operation[Any, Any]) -> type[BaseModel]:
    """The model of an operation's JSON body: its request model, or, where path or query fields
    travel apart, the request's other fields (a model named after it)."""
    fields = op.body_fields()
    if set(fields) == set(op.request.model_fields):
        return op.request
    if op.body is not None:
        return op.body
    kept = {name: (f.annotation, f) for name, f in op.request.model_fields.items() if name in fields}
    return create_model(f"{op.request.__name__}Body", __config__=op.request.model_config, **kept)  # type: ignore[call-overload,no-any-return]


def route(op: Operation[Any, Any]) -> Callable[..., Any]:
    """The route function of one row: its signature for the resolver, its body the one call."""
    after = _recall_metrics if op is ops.RECALL else None

    def handler(caller: Caller, service: Memory, **given: Any) -> Any:
        started = time.perf_counter()
        event = router.current_event
        path = {name: str(given[name]) for name in op.path_fields}
        body = event.json_body if op.has_body else None
        request = op.from_http(path, event.query_string_parameters or {}, body)
        result = service.invoke(op, request, caller=caller)
        if after is not None:
            after(caller.user or getattr(request, "user_id", None), result, started)
        if op.response is None:
            return Response(status_code=op.status)
        return result

    # Typed Any for the resolver: the service (and all it imports) loads on the first request.
    params = [
        _keyword("caller", Annotated[Any, Depends(current_caller)]),
        _keyword("service", Annotated[Any, Depends(get_service)]),
        *(_keyword(name, Annotated[op.request.model_fields[name].annotation, Path()]) for name in op.path_fields),
        *_query_parameters(op.request, op.query_fields()),
    ]
    if op.has_body:
        params.append(_keyword("request", body_model(op)))
    returns = Response[None] if op.response is None else op.response
    handler.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    handler.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    handler.__name__ = op.name
    handler.__doc__ = op.summary
    return handler


def _responses(op: Operation[Any, Any]) -> dict[int, Any]:
    answer = schemas.no_content(op.summary) if op.response is None else schemas.documented(op.summary, op.response)
    return {
        **schemas.COMMON_ERRORS,
        **{status: schemas.documented(text, schemas.ErrorBody) for status, text in op.errors},
        op.status: answer,
    }


for _op in ops.OPERATIONS:
    router.route(
        _op.path.replace("{", "<").replace("}", ">"),
        method=_op.method,
        summary=_op.summary,
        responses=_responses(_op),
        status_code=_op.status,
        operation_id=_op.name,
    )(route(_op))
