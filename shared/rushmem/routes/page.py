"""``/`` and ``/page/<name>``: the memory page's files, when RUSHMEM_WEB_PAGE is on (the page
calls the API's other routes)."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from rushmem.http.errors import route_not_found
from rushmem.http.page import HEADERS, page_file
from rushmem.lifecycle import get_service
from rushmem.routes.request import http_event

router = Router()


def _page(name: str) -> Response[Any]:
    if not get_service().settings.web_page:
        return route_not_found(http_event(router), "RUSHMEM_WEB_PAGE is off")
    found = page_file(name)
    if found is None:
        return route_not_found(http_event(router))
    content_type, body = found
    return Response(status_code=200, content_type=content_type, body=body, headers=dict(HEADERS))


@router.get("/", include_in_schema=False)
def memory_page() -> Response[Any]:
    return _page("index.html")


@router.get("/page/<name>", include_in_schema=False)
def memory_page_file(name: str) -> Response[Any]:
    return _page(name)
