"""The store's session over a psycopg connection (:class:`~rushmem.store.engine.session.Session`):
psycopg's own connection, with what the service set it up with, pipelined transactions, and a
deadline on waiting for the server."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg.abc import PQGen
from psycopg.rows import dict_row

from rushmem.store.engine.session import Params, Query, VectorSchema
from rushmem.store.engine.transactions import read_as_user
from rushmem_contract.errors import DatabaseUnavailable

logger = logging.getLogger(__name__)

RV = TypeVar("RV")


class DeadlineExceeded(DatabaseUnavailable):
    """The server did not answer within the call's deadline (``db_read_deadline_s``): frozen, partitioned
    or overloaded. The connection was closed (its state is unknown)."""


class PgSession(psycopg.Connection[Any]):
    """A psycopg connection as the store's session; open it with ``PgSession.connect(...)``."""

    sign_code_vectors = False  # vectors travel in binary, whole
    single_statement_reads = False  # a read as the user is pipelined instead: one round trip
    owns_session = True
    # Whether transactions may be pipelined (RUSHMEM_DB_PIPELINE).
    pipeline_transactions: bool = True
    vector_schema: VectorSchema | None = None
    change_events: str | None = None
    # time.monotonic() instant past which waiting for the server gives up (None: no deadline), and
    # whether it did: set around a call by Database.run(deadline_s=...).
    deadline_at: float | None = None
    deadline_hit: bool = False

    def wait(self, gen: PQGen[RV], interval: float = 0.1, timeout: float | None = None) -> RV:
        """psycopg's wait for the server, bounded by the deadline: a server that accepts bytes and
        never answers (SIGSTOP, a hung host) is given up on by the client, since no server-side
        timeout (statement_timeout) and no TCP timeout (the peer's kernel still acknowledges) can fire."""
        deadline = self.deadline_at
        if deadline is None:
            return super().wait(gen, interval, timeout)
        remaining = max(0.0, deadline - time.monotonic())
        try:
            return super().wait(gen, interval, remaining if timeout is None else min(timeout, remaining))
        except psycopg.OperationalError as exc:
            if time.monotonic() < deadline:
                raise
            self.deadline_hit = True
            self.pgconn.finish()  # a reply may still come: the session cannot be reused
            raise DeadlineExceeded("the database did not answer within the deadline") from exc

    def execute_dicts(
        self, query: Query, params: Params | None = None, *, prepare: bool | None = None, binary: bool = False
    ) -> psycopg.Cursor[dict[str, Any]]:
        return self.cursor(row_factory=dict_row, binary=binary).execute(query, params, prepare=prepare)

    def executemany(self, query: Query, params_seq: Iterable[Params]) -> None:
        with self.cursor() as cur:
            cur.executemany(query, params_seq)

    @contextlib.contextmanager
    def pipelined_transaction(self) -> Iterator[None]:
        """BEGIN travels with the first statement and COMMIT with the last ones (pipeline mode): two
        round trips fewer than ``transaction()``, which waits for each on its own. An error, or an
        exception in the block, rolls everything back. Inside a transaction or a pipeline, with
        autocommit off or pipelining turned off: ``transaction()`` (a savepoint, or psycopg's BEGIN)."""
        if not self._may_pipeline():
            with self.transaction():
                yield
            return
        try:
            with self.pipeline():
                self.execute("BEGIN")
                yield
                self.execute("COMMIT")
        except BaseException:
            self._recover()
            raise

    @contextlib.contextmanager
    def pipeline_of_transactions(self) -> Iterator[bool]:
        """Every transaction the block sends, with one Sync at the end: one round trip."""
        if not self._may_pipeline():
            yield False
            return
        try:
            with self.pipeline():
                yield True
        except BaseException:
            self._recover()
            raise

    read_once_as_user = read_as_user  # pipelined, the transaction's read is one round trip already

    def _may_pipeline(self) -> bool:
        """Unless turned off, with autocommit on, outside any transaction and pipeline."""
        return (
            self.pipeline_transactions
            and self.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
            and self.autocommit
            and self.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        )

    def _recover(self) -> None:
        """After a failed pipelined transaction: roll it back, or close a connection that can't be.

        Not a plain ROLLBACK: rollback() also forgets the statements psycopg prepared, some of
        which an aborted pipeline never let reach the server. When the server went away with
        statements still in flight, psycopg may fail to leave pipeline mode ("cannot exit
        pipeline mode while busy") before the connection looks broken; closing it then makes the
        caller see a lost connection (DatabaseUnavailable, retried), not an unexplained error.
        """
        if self.closed:
            return
        if self.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF:
            try:
                self.rollback()
                return
            except psycopg.Error:
                logger.debug("rollback after a failed transaction failed", exc_info=True)
        self.close()
