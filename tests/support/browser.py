"""The memory page's browser tests' helpers: ``rushmem serve`` in a subprocess (hash embedder, a
fresh embedded database) and Debian's headless chromium driven through its chromedriver by selenium.
Neither browser nor driver is ever downloaded: `make test` installs both with apt-get when missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = Path(__file__).resolve().parents[2]
MISSING = "Debian's chromium and chromium-driver are needed (`make test` installs them with apt-get)"


@contextmanager
def serving(data_dir: Path, settings: Mapping[str, str] | None = None) -> Iterator[str]:
    """``rushmem serve`` on 127.0.0.1, any free port, on a fresh database under ``data_dir``
    (with ``settings``: RUSHMEM_* variables); its URL."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RUSHMEM_")},
        "RUSHMEM_DATA_DIR": str(data_dir),
        "RUSHMEM_EMBEDDING_PROVIDER": "hash",
        "PYTHONUNBUFFERED": "1",
        **(settings or {}),
    }
    log = (data_dir.parent / "serve.log").open("w")
    serve = subprocess.Popen(
        [sys.executable, "-m", "rushmem_tools", "serve", "--host", "127.0.0.1", "--port", "0"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    try:
        assert serve.stdout is not None
        line = serve.stdout.readline()
        assert line, f"serve did not start: {(data_dir.parent / 'serve.log').read_text()}"
        started = json.loads(line)
        assert started["page"] == started["url"] + "/", started
        yield str(started["url"])
    finally:
        serve.terminate()
        serve.wait(timeout=60)
        log.close()


@contextmanager
def chromium(downloads: Path, *, extra_flags: tuple[str, ...] = ()) -> Iterator[webdriver.Chrome]:
    """A headless chromium that saves downloads into ``downloads`` without asking (``extra_flags``:
    more command-line switches, such as ``--host-resolver-rules``)."""
    browser = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    assert browser and driver, MISSING
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        *extra_flags,
    ):
        options.add_argument(flag)
    options.add_experimental_option(
        "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
    )
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield chrome
    finally:
        chrome.quit()
