"""What every route reads of the request it answers. Powertools keeps the current event on the
resolver, which each router reaches once included."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from rushmem.http.identity import jwt_claims

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.api_gateway import Router
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2


def http_event(router: Router) -> APIGatewayProxyEventV2:
    """The request being answered; an HTTP API (payload 2.0) event, as the handler's resolver is
    Powertools' APIGatewayHttpResolver (a router only knows it as a proxy event)."""
    return cast("APIGatewayProxyEventV2", router.current_event)


def claims(router: Router) -> dict[str, Any] | None:
    """The JWT's claims; None when no JWT authorizer vouched for the request (an IAM caller)."""
    return jwt_claims(router.current_event.raw_event)


def headers(router: Router) -> dict[str, str]:
    """The request's headers, names in lower case."""
    return {k.lower(): v for k, v in (router.current_event.headers or {}).items()}
