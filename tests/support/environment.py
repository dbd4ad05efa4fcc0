"""The environment the Lambda handlers read their settings from, for tests that invoke them."""

from __future__ import annotations

import pytest


def use_lambda_environment(monkeypatch: pytest.MonkeyPatch, database_url: str) -> None:
    """The functions build their service from the environment, as in Lambda: hash embeddings,
    and the application role, so row-level security applies as deployed; /mcp offers every tool (the
    tests drive them all; the default, small surface has its own tests: test_mcp_surface.py)."""
    monkeypatch.setenv("AGENT_MEMORY_DATABASE_URL", database_url)
    monkeypatch.setenv("RUSHMEM_MCP_TOOLS", "all")
    monkeypatch.setenv("AGENT_MEMORY_EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("AGENT_MEMORY_DB_ROLE", "agent_memory_app")
