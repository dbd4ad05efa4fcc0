"""The API's OpenAPI document as this API answers (validation errors are 400, not the resolver's
422), and the interactive page for it (Powertools' Swagger UI, its files inlined: no CDN)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_cache: dict[int, str] = {}


def openapi_document(app: Any) -> str:
    """The resolver's document, without the 422 answers it lists for every validated route (this
    API answers validation errors with 400, documented per route) and their schemas."""
    key = id(app)
    if key not in _cache:
        document = json.loads(app.get_openapi_json_schema())
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        schemas = document.get("components", {}).get("schemas", {})
        for unused in ("HTTPValidationError", "ValidationError", "ResponseValidationError"):
            schemas.pop(unused, None)
        _cache[key] = json.dumps(document, indent=2, ensure_ascii=False)
    return _cache[key]


def swagger_html(app: Any) -> str:
    """Swagger UI over :func:`openapi_document`, as Powertools' ``enable_swagger`` builds it
    (its bundled script and style inlined, so the page needs nothing from the internet)."""
    from aws_lambda_powertools.event_handler.openapi import swagger_ui
    from aws_lambda_powertools.event_handler.openapi.swagger_ui.html import generate_swagger_html

    folder = Path(swagger_ui.__file__).parent
    script = (folder / "swagger-ui-bundle.min.js").read_text(encoding="utf-8")
    style = (folder / "swagger-ui.min.css").read_text(encoding="utf-8")
    # As enable_swagger does: "</" escaped, so the document cannot close the page's script tag.
    spec = openapi_document(app).replace("</", "<\\/")
    return generate_swagger_html(spec, script, style, "", None, False)
