"""The stack's files (template.yaml, functions/*/app.py, events/) go into the wheel as package data of
rushmem_tools (under rushmem_tools/stack), so `rushmem serve`, `invoke` and `demo` work
from an installed package. They stay where they are in the repository (SAM reads them there); the
copy is made at build time. Everything else is in pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
STACK_FILES = ("template.yaml", "functions/*/app.py", "events/*.json")


class BuildPyWithStack(build_py):  # type: ignore[misc]
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return  # an editable install runs from the checkout, which has the files
        target = Path(self.build_lib) / "rushmem_tools" / "stack"
        for pattern in STACK_FILES:
            for source in sorted(ROOT.glob(pattern)):
                destination = target / source.relative_to(ROOT)
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, destination)


setup(cmdclass={"build_py": BuildPyWithStack})
