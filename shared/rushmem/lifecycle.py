"""What a Lambda container does around its requests: the service built on first use (so
loading a handler never imports the data path), and Lambda SnapStart's runtime hooks: warm up
before the snapshot, then let go of what no two restored containers may share (connections,
cached secrets, providers holding a key); reseed the random generator after a restore.
docs/serverless.md (Cold starts, SnapStart) says why each.
"""

from __future__ import annotations

import atexit
import logging
import random
import signal
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rushmem.service import Memory

logger = logging.getLogger(__name__)


def get_service() -> Memory:
    """The process-wide service (see :func:`rushmem.service.get_service`), imported on first use."""
    from rushmem.service import get_service as service

    return service()


# What the handler module itself can build ahead (e.g. its routes' request validation).
_handler_warm_ups: list[Callable[[], object]] = []


def warm_up() -> None:
    """Import and build what any request needs, without touching the network or the database."""
    service = get_service()
    _ = service.admin.embedder  # builds its client (boto3 for Bedrock), no call made
    _ = service.admin.extractor  # the same for the write path's LLM client
    _ = service.admin.recall_plan
    _ = service.admin.reads  # where reads go (connections stay closed)
    from rushmem.folding import fold
    from rushmem.service.dispatch import import_verbs

    import_verbs()  # every operation's path: the dispatcher defers them for cold starts without a snapshot

    fold("\u00e9")  # the confusables table, otherwise loaded by the first text that is not ASCII
    for warm in _handler_warm_ups:
        warm()


def before_snapshot() -> None:
    """Warm up, then drop connections and secrets (see the module's docstring)."""
    try:
        warm_up()
    except Exception:
        # A container that cannot warm up now still works: it builds what it needs on first use.
        logger.warning("warm-up before the snapshot failed", exc_info=True)
    get_service().admin.release_secrets()
    logger.info("ready for the snapshot: connections closed, secrets dropped")


def after_restore() -> None:
    """Make this container's state its own again (see the module's docstring)."""
    random.seed()  # every container restored from one snapshot would otherwise draw the same numbers
    get_service().admin.release_secrets()  # anything a hook or a stray thread fetched meanwhile
    logger.info("restored from a snapshot")


def at_shutdown() -> None:
    """Write what the container still keeps (usage counts of reads on a reader endpoint) and close
    the connections; nothing when no service was built."""
    package = sys.modules.get("rushmem.service")
    if package is None:  # never imported, so never built: importing it here would cost ~0.3 s at exit
        return
    service = package.built_service()
    if service is not None:
        service.close()


_shutdown_registered = False


def register_shutdown_hooks() -> None:
    """Run :func:`at_shutdown` when the interpreter exits and on SIGTERM (when Lambda sends one, and
    what is lost when it does not: docs/serverless.md). Only from the main thread (a signal handler
    can only be installed there); registered once."""
    global _shutdown_registered
    if _shutdown_registered:
        return
    _shutdown_registered = True
    atexit.register(at_shutdown)
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        try:
            at_shutdown()
        finally:
            if callable(previous):
                previous(signum, frame)
            else:
                sys.exit(0)

    try:
        signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread: the exit hook still runs
        logger.debug("SIGTERM handler not installed (not the main thread)")


def register_snapstart_hooks(warm: Callable[[], object] | None = None) -> bool:
    """Register the hooks with the runtime's ``snapshot_restore_py``; False where it is absent
    (outside Lambda). Lambda runs them only for functions with SnapStart on. ``warm``: more to
    build before the snapshot, from the handler module."""
    if warm is not None:
        _handler_warm_ups.append(warm)
    try:
        from snapshot_restore_py import register_after_restore, register_before_snapshot
    except ImportError:
        return False
    register_before_snapshot(before_snapshot)
    register_after_restore(after_restore)
    return True
