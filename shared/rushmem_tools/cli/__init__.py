"""The ``rushmem`` command line (see :mod:`.main`)."""

from rushmem_tools.cli.main import main, main_entry

__all__ = ["main", "main_entry"]
