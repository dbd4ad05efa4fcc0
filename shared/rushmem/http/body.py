"""Reading a request body as JSON, refusing what Python's json module reads but nothing after it
can carry: lone surrogates ("\\ud800"), NaN and infinities, numbers past Python's digit limit,
nesting deep enough to exhaust the parser. Each is a 400 naming the field, where there is one,
instead of a 500 from deep inside the service (the resolver calls this for every JSON body)."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from rushmem_contract.errors import InvalidInput
from rushmem_contract.inputs import JsonValueError, field_path, inspect_json

NOT_BASE64 = "the request body is flagged base64 (isBase64Encoded) but is not base64"

# json.loads gives up first (RecursionError near Python's recursion limit, 1000); this bounds the
# walk all the same. Values nested deeper than their field allows are refused by the models,
# which name the field (a memory's metadata: models.MAX_METADATA_DEPTH).
MAX_BODY_DEPTH = 1000


def parse_json_body(text: str) -> Any:
    """The body's JSON value; json.JSONDecodeError for a syntax error (the resolver answers it),
    InvalidInput for a value the service could not hold."""
    try:
        # NaN and Infinity are read (Python's json takes them) and refused by the walk below,
        # which names their field.
        value = json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise InvalidInput("the request body is nested too deeply") from None
    except ValueError as exc:  # an integer past Python's digit limit (4300)
        raise InvalidInput(f"the request body holds a number JSON cannot carry: {exc}") from None
    try:
        inspect_json(value, max_depth=MAX_BODY_DEPTH)
    except JsonValueError as exc:
        raise InvalidInput(f"request body: {exc}", field=field_path(exc.path) or None) from None
    return value


def base64_body(body: str) -> bytes:
    """The bytes of a body API Gateway flagged as base64 (``isBase64Encoded``); InvalidInput when
    it is not base64 (strictly: characters outside the alphabet are refused, not skipped)."""
    try:
        return base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):  # ValueError: a character that is not ASCII
        raise InvalidInput(NOT_BASE64) from None
