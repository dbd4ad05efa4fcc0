"""Fixtures for the deployment tests: the template, the `sam build` output, a stand-in for
CloudFormation's response URL, and the environment a local Lambda invoke runs with."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from rushmem_tools.local import runtime as lambda_local

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "template.yaml"


@pytest.fixture(scope="session")
def template() -> dict[str, Any]:
    return lambda_local.load_template(TEMPLATE)


@pytest.fixture(scope="session")
def sam_build_dir() -> Path:
    """`sam build`'s output. `make test` builds it first and sets SAM_BUILD_DIR: then it must exist."""
    configured = os.environ.get("SAM_BUILD_DIR")
    build = (REPO / configured) if configured else REPO / ".aws-sam" / "build"
    if not (build / "template.yaml").exists():
        if configured:
            pytest.fail(f"SAM_BUILD_DIR={configured} holds no sam build output; run `make sam-build`")
        pytest.skip("no .aws-sam/build: run `make sam-build` (make test does)")
    return build


class CloudFormationReceiver:
    """Plays the pre-signed S3 URL a custom resource answers to; keeps every PUT body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                receiver.bodies.append(json.loads(self.rfile.read(length)))
                receiver.headers.append(dict(self.headers))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/cfn-response"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def cfn_receiver() -> Iterator[CloudFormationReceiver]:
    receiver = CloudFormationReceiver()
    yield receiver
    receiver.close()
