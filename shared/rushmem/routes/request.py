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


def iam_arn(router: Router) -> str | None:
    """The ARN of the IAM principal that signed the request (AWS_IAM route), if there is one."""
    authorizer = router.current_event.raw_event.get("requestContext", {}).get("authorizer") or {}
    iam = authorizer.get("iam") if isinstance(authorizer, dict) else None
    arn = iam.get("userArn") if isinstance(iam, dict) else None
    return arn if isinstance(arn, str) else None


def headers(router: Router) -> dict[str, str]:
    """The request's headers, names in lower case."""
    return {k.lower(): v for k, v in (router.current_event.headers or {}).items()}
