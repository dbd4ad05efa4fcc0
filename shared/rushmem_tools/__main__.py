"""`python -m rushmem_tools` is the same as `rushmem`."""

from rushmem_tools.cli import main_entry

main_entry()
