"""`agent-memory demo`: the article's SVG-platform example through the real write path.

IngestFunction (the handler in template.yaml) is invoked in-process with
events/conversation-ended.json: two conversations of u-42 (the SVG editor, and a personal
one) and facts another user's client extracted itself. Then u-42 asks for something new and
the memories recalled for it become the [RUSH_MEMORY] block. Like Lambda, the handler reads
its configuration from the AGENT_MEMORY_* environment.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from agent_memory.service import get_service
from agent_memory_tools.local import runtime

DEMO_USER = "u-42"
DEMO_PROJECT = "svg-editor"
OTHER_USER = "u-77"
DEMO_QUERY = "Add an export-to-PNG button to the editor"
EVENT = Path("events") / "conversation-ended.json"


def _repository() -> Path:
    """The directory with template.yaml: the current one, else the checkout this package lives in."""
    for candidate in (Path.cwd(), Path(__file__).resolve().parents[3]):
        if (candidate / "template.yaml").exists():
            return candidate
    return Path.cwd()


@contextlib.contextmanager
def _quiet_handler() -> Iterator[None]:
    """The handler's JSON logs and metrics would drown the demo's output (set these variables to
    see them); restored afterwards, so a caller's own metrics and logs are left as they were."""
    defaults = {"POWERTOOLS_LOG_LEVEL": "WARNING", "POWERTOOLS_METRICS_DISABLED": "true"}
    added = [name for name in defaults if name not in os.environ]
    os.environ.update({name: defaults[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def run_demo(out: IO[str], root: Path | None = None) -> int:
    root = root or _repository()
    service = get_service()  # the handler's own service: same settings, one model load
    for user in (DEMO_USER, OTHER_USER):
        service.forget_user(user)  # start clean (receipts too), so the demo can run any number of times
    event = runtime.read_event(root / EVENT)
    with _quiet_handler():
        result = runtime.invoke(root / "template.yaml", "IngestFunction", event)
    out.write(f"IngestFunction <- {EVENT} ({len(event['Records'])} SQS records): {json.dumps(result)}\n")
    for user in (DEMO_USER, OTHER_USER):
        memories = service.list(user_id=user).memories
        out.write(f"\n{len(memories)} memories of {user}:\n")
        out.writelines(f"  [{m.category}] {m.content}  (from {m.source})\n" for m in memories)

    recalled = service.recall(DEMO_QUERY, user_id=DEMO_USER, project_id=DEMO_PROJECT)
    out.write(f"\nEmbedder: {service.admin.embedder.fingerprint}; extractor: {service.admin.extractor.fingerprint}\n")
    out.write(f"New request from {DEMO_USER} in {DEMO_PROJECT}: {DEMO_QUERY!r}\n\n")
    out.write(f"{'score':>6}  {'category':<10}  memory\n")
    for memory in recalled.memories:
        out.write(f"{memory.score:6.3f}  {memory.category:<10}  {memory.content}\n")
    out.write("\nSystem prompt block:\n\n" + recalled.prompt_block + "\n")
    return 0 if not result.get("batchItemFailures") else 1
