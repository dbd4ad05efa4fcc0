"""Helpers for the write-path tests: SQS records as Lambda delivers them, a local
OpenAI-compatible chat server (real HTTP on 127.0.0.1) whose answers a test scripts, and
concurrent deliveries (threads meeting at a barrier, or IngestFunction in several processes)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from rushmem.embeddings.hashing import HashEmbedder
from rushmem.service import Memory
from rushmem.store.engine.connection import Connection
from rushmem.store.engine.transactions import user_transaction
from rushmem.store.memories.writes import supersede_memories
from rushmem_tools.local import runtime as lambda_local

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "template.yaml"
QUEUE_ARN = "arn:aws:sqs:eu-west-1:123456789012:agent-memory-conversations"
APP = "agent_memory_app"  # the functions' database role: row-level security applies


class MeetingEmbedder(HashEmbedder):
    """Embeds only when every other delivery is at the same point: all of them have read what
    they check before writing (receipts, related memories) before any of them writes."""

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__()
        self.barrier = barrier

    def embed(self, texts: Sequence[str]) -> Any:
        self.barrier.wait(timeout=30)
        return super().embed(texts)


def in_lockstep(count: int, work: Callable[[int, threading.Barrier], None]) -> None:
    """Run ``work(i, barrier)`` for each i in its own thread, all sharing one barrier (for a
    MeetingEmbedder); fails with whatever any of them raised."""
    barrier = threading.Barrier(count)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i, barrier)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors


def start_ingest_process(database_url: str, event: Path) -> subprocess.Popen[str]:
    """`rushmem invoke IngestFunction EVENT` in a process of its own (a Lambda container),
    started, not awaited: its answer (JSON) comes on stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_MEMORY_")}
    env.update(AGENT_MEMORY_DATABASE_URL=database_url, AGENT_MEMORY_EMBEDDING_PROVIDER="hash", AGENT_MEMORY_DB_ROLE=APP)
    cli = Path(sys.executable).parent / "rushmem"
    return subprocess.Popen(
        [str(cli), "invoke", "IngestFunction", str(event), "--template", str(TEMPLATE)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def invoke_ingest_in_processes(database_url: str, events: Sequence[Path], *, timeout: float) -> list[dict[str, Any]]:
    """`rushmem invoke IngestFunction EVENT` for each event, each in its own process (a
    Lambda container), all at once; their answers, in order."""
    procs = [start_ingest_process(database_url, event) for event in events]
    answers: list[dict[str, Any]] = [json.loads(p.communicate(timeout=timeout)[0]) for p in procs]
    return answers


def sqs_record(
    body: str | dict[str, Any],
    *,
    message_id: str | None = None,
    sent_at: dt.datetime | None = None,
    receive_count: int = 1,
) -> dict[str, Any]:
    """One record of a Lambda SQS event, shaped like `sam local generate-event sqs receive-message`."""
    text = body if isinstance(body, str) else json.dumps(body)
    sent = int((sent_at or dt.datetime(2026, 11, 29, 10, 15, 1, tzinfo=dt.UTC)).timestamp() * 1000)
    return {
        "messageId": message_id or str(uuid.uuid4()),
        "receiptHandle": "AQEB" + base64.b64encode(uuid.uuid4().bytes * 4).decode(),
        "body": text,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": str(sent),
            "SenderId": "AROAEXAMPLEID123456789:chat-backend",
            "ApproximateFirstReceiveTimestamp": str(sent + 20),
        },
        "messageAttributes": {},
        "md5OfBody": hashlib.md5(text.encode()).hexdigest(),
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "eu-west-1",
    }


def sqs_event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def conversation(user_id: str = "u-42", **fields: Any) -> dict[str, Any]:
    """A "conversation ended" body with one fact the rules extractor keeps."""
    body: dict[str, Any] = {
        "user_id": user_id,
        "conversation_id": "c-1",
        "ended_at": "2026-11-29T10:15:00Z",
        "messages": [
            {"role": "user", "content": "Hi! My stack is TypeScript."},
            {"role": "assistant", "content": "Great, how can I help?"},
        ],
    }
    body.update(fields)
    return body


def failures(response: dict[str, Any]) -> list[str]:
    """The messageIds of a partial batch response (and a check of its exact shape)."""
    assert set(response) == {"batchItemFailures"}
    assert all(set(f) == {"itemIdentifier"} for f in response["batchItemFailures"])
    return [f["itemIdentifier"] for f in response["batchItemFailures"]]


# ---- a local OpenAI-compatible chat completions server ---------------------------------


def chat_completion(content: str, *, finish_reason: str = "stop", model: str = "glm-4-flash") -> dict[str, Any]:
    """A response in the documented chat.completion shape (OpenAI; Zhipu's is the same)."""
    return {
        "id": "chatcmpl-" + uuid.uuid4().hex[:24],
        "object": "chat.completion",
        "created": 1796000000,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 412, "completion_tokens": 58, "total_tokens": 470},
    }


def memories_answer(*items: dict[str, Any]) -> dict[str, Any]:
    return chat_completion(json.dumps({"memories": list(items)}))


@dataclass
class Reply:
    status: int = 200
    # Or a function of the request's JSON: a model stand-in that reads the prompt.
    body: dict[str, Any] | str | Callable[[Any], dict[str, Any]] = ""
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    json: Any


class ChatServer:
    """Answers every POST (/v1/chat/completions, /v1/embeddings, Bedrock's /model/...) with the
    scripted replies in order (then ``default``); ``max_in_flight`` is the most requests it was
    answering at once."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.default = Reply(500, {"error": {"message": "no reply scripted", "type": "server_error"}})
        self.requests: list[Request] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = Request(self.path, dict(self.headers), json.loads(raw or b"null"))
                with server._lock:
                    server.requests.append(request)
                    reply = server.replies.pop(0) if server.replies else server.default
                    server._in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server._in_flight)
                try:
                    time.sleep(reply.delay_s)
                finally:
                    with server._lock:
                        server._in_flight -= 1
                body = reply.body(request.json) if callable(reply.body) else reply.body
                payload = body if isinstance(body, str) else json.dumps(body)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload.encode())))
                    self.end_headers()
                    self.wfile.write(payload.encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away: as a slow provider would see it

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        # A short poll interval: shutting the server down at the end of a test takes that long.
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._http.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()


def invoke_ingest(event: dict[str, Any]) -> dict[str, Any]:
    """IngestFunction's answer to ``event``, through the local Lambda runtime (as sam local invoke)."""
    result: dict[str, Any] = lambda_local.invoke(TEMPLATE, "IngestFunction", event)
    return result


def chat_server() -> Iterator[ChatServer]:
    with ChatServer() as server:
        yield server


def supersede(
    service: Memory, user_id: str, old_ids: Sequence[uuid.UUID], new_id: uuid.UUID, *, source: str | None = None
) -> list[uuid.UUID]:
    """Mark memories as replaced by ``new_id`` with the write path's own statement (what an
    extractor's "replaces" does), without scripting an LLM; the ids actually marked."""

    def work(conn: Connection) -> list[uuid.UUID]:
        with user_transaction(conn, user_id, source=source):
            pairs = [(old, new_id) for old in dict.fromkeys(old_ids)]
            return [old for old, _ in supersede_memories(conn, user_id, pairs)]

    marked: list[uuid.UUID] = service.admin.db.run(work)
    return marked
