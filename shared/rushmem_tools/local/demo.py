"""`rushmem demo`: the article's SVG-platform example through the real write path.

IngestFunction (the handler in template.yaml) is invoked in-process with
events/conversation-ended.json: two conversations of u-42 (the SVG editor, and a personal
one) and facts another user's client extracted itself. Then u-42 asks for something new and
the memories recalled for it become the [RUSH_MEMORY] block. Like Lambda, the handler reads
its configuration from the RUSHMEM_* environment.

The demo touches only what it creates: the event's users become users of this run alone
(``demo-<run>-u-42``), erased when it ends, whether it succeeded or not (unless ``keep``), so it
can run against any database without reading or erasing anyone else's memories.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from rushmem.service import get_service
from rushmem_tools.local import runtime
from rushmem_tools.local.stack import stack_root

EVENT_USER = "u-42"
EVENT_OTHER_USER = "u-77"
DEMO_PROJECT = "svg-editor"
DEMO_QUERY = "Add an export-to-PNG button to the editor"
EVENT = Path("events") / "conversation-ended.json"


@contextlib.contextmanager
def _quiet_handler() -> Iterator[None]:
    """The handler's JSON logs and metrics would drown the demo's output (set these variables to
    see them); restored afterwards, so a caller's own metrics and logs are left as they were."""
    defaults = runtime.QUIET_HANDLERS
    added = [name for name in defaults if name not in os.environ]
    os.environ.update({name: defaults[name] for name in added})
    try:
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def demo_event(event: dict[str, Any], users: dict[str, str]) -> dict[str, Any]:
    """``event`` (SQS records of "conversation ended" messages) with its users renamed as ``users`` says."""
    records = []
    for record in event["Records"]:
        body = json.loads(record["body"])
        body["user_id"] = users.get(body["user_id"], body["user_id"])
        records.append({**record, "body": json.dumps(body)})
    return {**event, "Records": records}


def run_demo(out: IO[str], root: Path | None = None, *, keep: bool = False) -> int:
    root = root or stack_root()
    service = get_service()  # the handler's own service: same settings, one model load
    run = uuid.uuid4().hex[:8]
    users = {name: f"demo-{run}-{name}" for name in (EVENT_USER, EVENT_OTHER_USER)}
    user, other = users[EVENT_USER], users[EVENT_OTHER_USER]
    event = demo_event(runtime.read_event(root / EVENT), users)
    try:
        with _quiet_handler():
            result = runtime.invoke(root / "template.yaml", "IngestFunction", event)
        out.write(f"IngestFunction <- {EVENT} ({len(event['Records'])} SQS records): {json.dumps(result)}\n")
        for name in (user, other):
            memories = service.list(user_id=name).memories
            out.write(f"\n{len(memories)} memories of {name}:\n")
            out.writelines(f"  [{m.category}] {m.content}  (from {m.source})\n" for m in memories)

        recalled = service.recall(DEMO_QUERY, user_id=user, project_id=DEMO_PROJECT, explain=True)
        out.write(
            f"\nEmbedder: {service.admin.embedder.fingerprint}; extractor: {service.admin.extractor.fingerprint}\n"
        )
        out.write(f"New request from {user} in {DEMO_PROJECT}: {DEMO_QUERY!r}\n\n")
        out.write(f"{'score':>6}  {'category':<10}  memory\n")
        for memory in recalled.memories:
            out.write(f"{memory.score:6.3f}  {memory.category:<10}  {memory.content}\n")
        explained = recalled.explanation.candidates if recalled.explanation else []
        cut = [c for c in explained if c.outcome == "below_relative_score"]
        if cut:
            share = service.admin.recall_plan.min_relative_score
            out.write(f"left out, below {share:g} x the best score (RUSHMEM_MIN_RELATIVE_SCORE=0 keeps them):\n")
            out.writelines(f"{c.score:6.3f}  {c.category:<10}  {c.content}\n" for c in cut)
        out.write(f"\nSystem prompt block ({recalled.block_tokens} tokens):\n\n" + recalled.prompt_block + "\n")
    finally:
        if not keep:
            for name in (user, other):
                service.forget_user(name, requested_by="rushmem demo")
    if keep:
        out.write(f"\nKept the demo's users {user} and {other} (rushmem list --user {user}).\n")
    return 0 if not result.get("batchItemFailures") else 1
