"""``/openapi.json`` and ``/docs``: the API's OpenAPI document and its Swagger UI page, when
RUSHMEM_API_DOCS is on (else they answer as an unknown path does)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from rushmem.http.errors import route_not_found
from rushmem.http.openapi import openapi_document, swagger_html
from rushmem.lifecycle import get_service
from rushmem.routes.request import http_event

router = Router()


def _docs_off() -> Response[Any] | None:
    if get_service().settings.api_docs:
        return None
    return route_not_found(http_event(router), "RUSHMEM_API_DOCS is off")


@router.get("/openapi.json", include_in_schema=False)
def openapi_json() -> Response[Any]:
    # The document of the resolver that includes this router: every route's, not this router's.
    return _docs_off() or Response(
        status_code=200, content_type="application/json", body=openapi_document(router.api_resolver)
    )


@router.get("/docs", include_in_schema=False)
def swagger_page() -> Response[Any]:
    return _docs_off() or Response(
        status_code=200, content_type="text/html; charset=utf-8", body=swagger_html(router.api_resolver)
    )
