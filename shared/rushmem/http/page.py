"""The page to see and manage a user's memories (GET / and its files under GET /page/): static
HTML, CSS and one vanilla script shipped inside the package (``static/``), nothing from a CDN, no
build step. The page holds no data: its script calls the API's own routes (recall, list, history,
change, forget, export), so whoever may use the page is whoever the API lets in."""

from __future__ import annotations

import functools
from importlib import resources

# The only files served; anything else under /page/ is a 404.
CONTENT_TYPES: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
    "page.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}

# Memories can hold hostile text: the script builds the page with textContent only, and this policy
# would stop an injected script or inline handler even if a bug let markup through.
HEADERS: dict[str, str] = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@functools.cache
def page_file(name: str) -> tuple[str, str] | None:
    """(content type, text) of one of the page's files; None for a name that is not one."""
    content_type = CONTENT_TYPES.get(name)
    if content_type is None:
        return None
    text = resources.files("rushmem.http").joinpath("static", name).read_text(encoding="utf-8")
    return content_type, text
