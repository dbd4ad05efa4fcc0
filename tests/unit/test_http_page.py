"""The memory page's files (rushmem.http.page): all shipped in the package, nothing fetched from
elsewhere, and a script that never turns text into markup."""

from __future__ import annotations

import re

from rushmem.http.page import CONTENT_TYPES, HEADERS, page_file


def _text(name: str) -> str:
    found = page_file(name)
    assert found is not None, name
    return found[1]


def test_every_file_the_page_names_is_served_and_nothing_else() -> None:
    html = _text("index.html")
    named = set(re.findall(r'(?:src|href)="page/([^"]+)"', html))
    assert named == set(CONTENT_TYPES) - {"index.html"}
    assert all(_text(name).strip() for name in CONTENT_TYPES)
    assert page_file("../page.py") is None and page_file("index.htm") is None


def test_the_page_loads_nothing_from_another_origin() -> None:
    # Users may be offline, and a CDN would see who opens the page.
    for name in CONTENT_TYPES:
        text = re.sub(r'xmlns="[^"]*"', "", _text(name))  # an SVG's namespace is a name, not a load
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, flags=re.I), name


def test_the_script_never_parses_text_as_markup() -> None:
    script = _text("page.js")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
    assert "textContent" in script


def test_the_policy_allows_only_the_pages_own_script_and_style() -> None:
    policy = dict(part.strip().split(" ", 1) for part in HEADERS["Content-Security-Policy"].split(";"))
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == policy["style-src"] == policy["connect-src"] == "'self'"
