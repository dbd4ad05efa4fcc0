"""The memory page (GET /) in a real headless chromium, against ``rushmem serve`` on a fresh
embedded database with the hash embedder: the list and its filters, recall with the [RUSH_MEMORY]
block, one memory with its history, edit, delete, export, and hostile text shown as text.

With PAGE_SCREENSHOTS=DIR the tests also save the screenshots docs/page.md shows
(`make page-screenshots` writes them into docs/)."""

from __future__ import annotations

import datetime as dt
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver import Chrome
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.support.browser import chromium, serving

USER = "u-page"
SEEDS: list[tuple[str | None, list[dict[str, Any]]]] = [
    (
        "svg-editor",
        [
            {"content": "The user prefers TypeScript, with React for the UI", "category": "preference"},
            {"content": "Every SVG change must be synced to defaultSVG", "category": "decision", "is_evergreen": True},
            {"content": "The editor exports PNG files through an offscreen canvas", "category": "project"},
        ],
    ),
    ("billing", [{"content": "Invoices are generated on the first day of the month", "category": "fact"}]),
    (None, [{"content": "The user lives in Lisbon", "category": "identity"}]),
]
HOSTILE_USER = "u-hostile"
HOSTILE = [
    "<img src=x onerror=\"document.title='pwned'\"> likes tea",
    "<script>document.title='pwned'</script> drinks green tea",
]
WAIT_S = 30


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving(tmp_path_factory.mktemp("serve") / "pgdata") as base:
        for project, memories in SEEDS:
            body: dict[str, Any] = {"user_id": USER, "memories": memories}
            if project:
                body["project_id"] = project
            assert httpx.post(f"{base}/memories", json=body, timeout=60).status_code == 201
        hostile = {"user_id": HOSTILE_USER, "memories": [{"content": text} for text in HOSTILE]}
        assert httpx.post(f"{base}/memories", json=hostile, timeout=60).status_code == 201
        yield base


@pytest.fixture(scope="module")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(downloads: Path) -> Iterator[Chrome]:
    with chromium(downloads) as driver:
        yield driver


def api(url: str, method: str, path: str, **kwargs: Any) -> Any:
    answer = httpx.request(method, f"{url}{path}", timeout=60, **kwargs)
    answer.raise_for_status()
    return answer.json() if answer.content else None


def wait(browser: Chrome, condition: Any, what: str) -> Any:
    return WebDriverWait(browser, WAIT_S, poll_frequency=0.1).until(lambda _: condition(), message=what)


def status(browser: Chrome) -> str:
    return str(browser.find_element(By.ID, "status").text)


def set_status(browser: Chrome, text: str) -> None:
    """Clears the status line, so a wait sees the answer of the next action, not the last one."""
    browser.execute_script("document.getElementById('status').textContent = arguments[0]", text)


def open_user(browser: Chrome, url: str, user: str, project: str = "") -> None:
    browser.get(f"{url}/")
    wait(browser, lambda: status(browser), "the page's first status line")
    set_status(browser, "")
    for field, value in (("project", project), ("user", user)):
        box = browser.find_element(By.ID, field)
        box.clear()
        box.send_keys(value)
    browser.find_element(By.ID, "user").send_keys(Keys.ENTER)
    wait(browser, lambda: status(browser).startswith("Listed"), "the list")


def rows(browser: Chrome) -> list[WebElement]:
    return list(browser.find_elements(By.CSS_SELECTOR, "#memories tbody tr"))


def listed(browser: Chrome) -> list[str]:
    return [str(r.find_element(By.CSS_SELECTOR, "span.text").get_property("textContent")) for r in rows(browser)]


def submit_list(browser: Chrome) -> None:
    set_status(browser, "")
    browser.find_element(By.CSS_SELECTOR, "#list-form button[type=submit]").click()
    wait(browser, lambda: status(browser).startswith("Listed"), "the list")


def set_date(browser: Chrome, field: str, value: str) -> None:
    # A date input's typed form depends on the browser's locale; its value is always ISO.
    browser.execute_script("arguments[0].value = arguments[1]", browser.find_element(By.ID, field), value)


def open_memory(browser: Chrome, content: str) -> str:
    row = next(r for r in rows(browser) if r.find_element(By.CSS_SELECTOR, "span.text").text == content)
    memory_id = str(row.get_attribute("data-id"))
    row.find_element(By.CSS_SELECTOR, "button.link").click()
    wait(browser, lambda: browser.find_element(By.ID, "detail-id").text == memory_id, "the memory's panel")
    return memory_id


def history(browser: Chrome) -> list[list[str]]:
    cells = [r.find_elements(By.TAG_NAME, "td") for r in browser.find_elements(By.CSS_SELECTOR, "#history tbody tr")]
    return [[str(c.get_property("textContent")) for c in row] for row in cells]


def screenshot(browser: Chrome, name: str, height: int = 1000) -> None:
    folder = os.environ.get("PAGE_SCREENSHOTS")
    if folder:
        browser.set_window_size(1280, height)
        time.sleep(0.3)  # the resize's relayout
        browser.save_screenshot(str(Path(folder) / f"page-{name}.png"))
        browser.set_window_size(1280, 1000)


def test_the_list_shows_the_users_memories_and_its_filters_narrow_it(browser: Chrome, url: str) -> None:
    open_user(browser, url, USER)
    everything = sorted(m["content"] for _, memories in SEEDS for m in memories)
    assert sorted(listed(browser)) == everything
    # The API's order (newest first), and nothing of the other user.
    assert listed(browser) == [m["content"] for m in api(url, "GET", "/memories", params={"user_id": USER})["memories"]]
    screenshot(browser, "list", 760)

    Select(browser.find_element(By.ID, "category")).select_by_visible_text("decision")
    submit_list(browser)
    assert listed(browser) == ["Every SVG change must be synced to defaultSVG"]
    Select(browser.find_element(By.ID, "category")).select_by_visible_text("any")

    today = dt.datetime.now(dt.UTC).date()
    set_date(browser, "created-before", today.isoformat())
    submit_list(browser)
    assert listed(browser) == []
    set_date(browser, "created-before", "")
    set_date(browser, "created-after", today.isoformat())
    submit_list(browser)
    assert sorted(listed(browser)) == everything
    set_date(browser, "created-after", "")

    browser.find_element(By.ID, "text").send_keys("svg")
    assert listed(browser) == ["Every SVG change must be synced to defaultSVG"]
    assert "1 of 5 listed" in browser.find_element(By.ID, "count").text
    browser.find_element(By.ID, "text").clear()
    browser.find_element(By.ID, "text").send_keys(Keys.BACKSPACE)

    # A project's memories and the user's project-less ones, as the API lists them.
    open_user(browser, url, USER, project="billing")
    assert sorted(listed(browser)) == [
        "Invoices are generated on the first day of the month",
        "The user lives in Lisbon",
    ]
    assert listed(browser) == [
        m["content"]
        for m in api(url, "GET", "/memories", params={"user_id": USER, "project_id": "billing"})["memories"]
    ]


def test_recall_shows_the_block_and_the_memories_the_api_recalls(browser: Chrome, url: str) -> None:
    open_user(browser, url, USER)
    query = "Add an export-to-PNG button to the SVG editor"
    browser.find_element(By.ID, "query").send_keys(query + Keys.ENTER)
    wait(browser, lambda: status(browser).startswith("Recalled"), "the recall")
    expected = api(url, "POST", "/recall", json={"user_id": USER, "query": query, "limit": 5})
    block = str(browser.find_element(By.ID, "prompt-block").get_property("textContent"))
    assert block == expected["prompt_block"] and block.startswith("[RUSH_MEMORY]")
    assert "defaultSVG" in block
    shown = [str(e.get_property("textContent")) for e in browser.find_elements(By.CSS_SELECTOR, "#recalled .content")]
    assert shown == [m["content"] for m in expected["memories"]]
    screenshot(browser, "recall", 900)


def test_one_memory_with_its_history_edited_then_deleted(browser: Chrome, url: str) -> None:
    open_user(browser, url, USER)
    memory_id = open_memory(browser, "The user lives in Lisbon")
    assert [event[1] for event in history(browser)] == ["created"]

    content = browser.find_element(By.ID, "edit-content")
    content.clear()
    content.send_keys("The user lives in Porto")
    Select(browser.find_element(By.ID, "edit-category")).select_by_visible_text("fact")
    set_status(browser, "")
    browser.find_element(By.CSS_SELECTOR, "#edit-form button[type=submit]").click()
    wait(browser, lambda: status(browser) == "Saved.", "the save")
    stored = api(url, "GET", f"/memories/{memory_id}", params={"user_id": USER})
    assert (stored["content"], stored["category"]) == ("The user lives in Porto", "fact")
    events = api(url, "GET", f"/memories/{memory_id}/history", params={"user_id": USER})["events"]
    assert len(events) > 1
    assert [row[1:] for row in history(browser)] == [[e["event"], e["source"] or "", e["content"]] for e in events]
    assert "The user lives in Porto" in listed(browser) and "The user lives in Lisbon" not in listed(browser)
    browser.find_element(By.ID, "detail").location_once_scrolled_into_view  # noqa: B018  # scrolls it into view
    screenshot(browser, "memory", 1000)

    set_status(browser, "")
    browser.find_element(By.ID, "delete").click()
    alert = WebDriverWait(browser, WAIT_S).until(lambda d: d.switch_to.alert)
    alert.accept()
    wait(browser, lambda: status(browser) == "Deleted.", "the delete")
    assert "The user lives in Porto" not in listed(browser)
    assert httpx.get(f"{url}/memories/{memory_id}", params={"user_id": USER}).status_code == 404
    assert not browser.find_element(By.ID, "detail").is_displayed()


def test_a_dismissed_delete_keeps_the_memory(browser: Chrome, url: str) -> None:
    open_user(browser, url, USER)
    memory_id = open_memory(browser, "Every SVG change must be synced to defaultSVG")
    browser.find_element(By.ID, "delete").click()
    WebDriverWait(browser, WAIT_S).until(lambda d: d.switch_to.alert).dismiss()
    assert httpx.get(f"{url}/memories/{memory_id}", params={"user_id": USER}).status_code == 200
    assert "Every SVG change must be synced to defaultSVG" in listed(browser)


def test_export_downloads_the_users_memories_as_jsonl(browser: Chrome, url: str, downloads: Path) -> None:
    open_user(browser, url, USER)
    set_status(browser, "")
    browser.find_element(By.ID, "export").click()
    wait(browser, lambda: status(browser).startswith("Exported"), "the export")
    saved = downloads / f"memories-{USER}.jsonl"
    wait(browser, lambda: saved.is_file() and not list(downloads.glob("*.crdownload")), "the downloaded file")
    lines = [json.loads(line) for line in saved.read_text(encoding="utf-8").splitlines()]
    expected = api(url, "GET", "/memories/export", params={"user_id": USER, "history": "true", "limit": 500})
    # Five seeded, one edited then deleted by an earlier test: the delete took the version its edit kept too.
    assert lines == expected["lines"] and len(lines) == 4
    assert all(line["user_id"] == USER and line["history"] for line in lines)


def test_hostile_memory_text_is_shown_as_text_never_run(browser: Chrome, url: str) -> None:
    stored = {m["content"] for m in api(url, "GET", "/memories", params={"user_id": HOSTILE_USER})["memories"]}
    assert stored == set(HOSTILE)  # stored as given, so the page must show exactly this
    open_user(browser, url, HOSTILE_USER)
    assert sorted(listed(browser)) == sorted(HOSTILE)
    browser.find_element(By.ID, "query").send_keys("tea" + Keys.ENTER)
    wait(browser, lambda: status(browser).startswith("Recalled"), "the recall")
    block = str(browser.find_element(By.ID, "prompt-block").get_property("textContent"))
    assert block == api(url, "POST", "/recall", json={"user_id": HOSTILE_USER, "query": "tea"})["prompt_block"]
    open_memory(browser, HOSTILE[0])
    assert HOSTILE[0] in [str(e.get_property("textContent")) for e in browser.find_elements(By.TAG_NAME, "dd")]
    assert [row[3] for row in history(browser)] == [HOSTILE[0]]
    # No element was made from the text, and nothing ran (the title would say so).
    assert browser.find_elements(By.CSS_SELECTOR, "body img, body script") == []
    assert browser.title == "rushmem"
    screenshot(browser, "hostile", 1000)
