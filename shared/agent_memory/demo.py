"""`agent-memory demo`: the article's SVG-platform example, end to end on the local setup."""

from __future__ import annotations

from typing import IO

from agent_memory.models import NewMemory
from agent_memory.service import MemoryService

DEMO_USER = "demo-user"
OTHER_USER = "demo-other-user"
DEMO_QUERY = "Add an export-to-PNG button to the editor"

USER_FACTS = [
    NewMemory(content="The user's tech stack is TypeScript.", category="preference", is_evergreen=True),
    NewMemory(
        content="The user's product is an SVG editor with live preview, code editing and export.",
        category="project",
        is_evergreen=True,
    ),
    NewMemory(
        content="Every SVG modification must be synced to the defaultSVG variable.",
        category="decision",
        is_evergreen=True,
    ),
    NewMemory(content="The user lives in Lisbon.", category="identity"),
    NewMemory(content="The user has a golden retriever named Biscuit.", category="fact"),
    NewMemory(content="The user is training for a half marathon.", category="fact"),
    NewMemory(content="The user's favourite food is ramen.", category="preference"),
]
# Another tenant whose facts overlap the query's words: they must never show up.
OTHER_FACTS = [
    NewMemory(content="The user's product is a PNG export service written in Go.", category="project"),
    NewMemory(content="The user prefers Python for every editor plugin.", category="preference"),
]


def run_demo(service: MemoryService, out: IO[str]) -> int:
    for user in (DEMO_USER, OTHER_USER):
        service.forget(user)  # start clean, so the demo can run any number of times
    service.remember(DEMO_USER, USER_FACTS, source="demo")
    service.remember(OTHER_USER, OTHER_FACTS, source="demo")
    result = service.recall(DEMO_USER, DEMO_QUERY)

    out.write(f"Stored {len(USER_FACTS)} memories for {DEMO_USER} and {len(OTHER_FACTS)} for {OTHER_USER}.\n")
    out.write(f"Embedder: {service.embedder.fingerprint}\n\n")
    out.write(f"New request from {DEMO_USER}: {DEMO_QUERY!r}\n\n")
    out.write(f"{'score':>6}  {'category':<10}  memory\n")
    for memory in result.memories:
        out.write(f"{memory.score:6.3f}  {memory.category:<10}  {memory.content}\n")
    out.write("\nSystem prompt block:\n\n")
    out.write(result.prompt_block + "\n")
    return 0
