"""Small helpers both client halves use."""

from __future__ import annotations

import re
from typing import Any


def without_none(**values: Any) -> dict[str, Any]:
    """The arguments that were given: the API's defaults apply to the rest."""
    return {k: v for k, v in values.items() if v is not None}


def region_from_host(host: str, pattern: re.Pattern[str]) -> str | None:
    """The AWS region in an endpoint's host name (execute-api, sqs), if ``pattern`` finds one."""
    match = pattern.match(host.lower())
    return match.group(1) if match else None
