"""Where reads go (rushmem.store.engine.readers), without a database: fake endpoints that answer or
fail as a reader can."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.store.engine.readers import ReadRouter, reader_settings
from rushmem_contract.errors import ConfigurationError, DatabaseUnavailable, StatementTimeout


class Endpoint:
    """Answers with its name, or raises what it is told to."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.failure: BaseException | None = None
        self.calls = 0
        self.closed = 0

    def run(self, work: Callable[[Any], Any], *, retry: bool = True, deadline_s: float | None = None) -> Any:
        self.calls += 1
        if self.failure is not None:
            raise self.failure
        return work(self.name)

    def close(self) -> None:
        self.closed += 1


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def router(retry_after_s: float = 30.0) -> tuple[ReadRouter, Endpoint, Endpoint, Clock]:
    writer, reader, clock = Endpoint("writer"), Endpoint("reader"), Clock()
    return ReadRouter(writer, reader, retry_after_s=retry_after_s, clock=clock), writer, reader, clock  # type: ignore[arg-type]


def where(r: ReadRouter, consistency: str = "eventual") -> str:
    result: str = r.run(lambda name: name, consistency=consistency)  # type: ignore[arg-type]
    return result


def test_eventual_reads_go_to_the_reader_and_strong_ones_to_the_writer() -> None:
    r, _, _, _ = router()
    assert where(r) == "reader"
    assert where(r, "strong") == "writer"


def test_without_a_reader_everything_reads_the_writer() -> None:
    writer = Endpoint("writer")
    r = ReadRouter(writer, None, retry_after_s=30)  # type: ignore[arg-type]
    assert where(r) == "writer"
    assert r.take_fallbacks() == 0


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (DatabaseUnavailable("cannot connect"), "unavailable"),
        (psycopg.errors.SerializationFailure("canceling statement due to conflict with recovery"), "conflict"),
        (psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"), "read_only"),
    ],
)
def test_a_failed_reader_hands_the_read_to_the_writer_then_rests(failure: BaseException, reason: str) -> None:
    r, _, reader, clock = router(retry_after_s=30)
    reader.failure = failure
    assert where(r) == "writer"
    assert r.fallbacks == {reason: 1}
    assert reader.closed == 1  # a fresh connection when it is tried again
    clock.now += 29
    assert where(r) == "writer"
    assert reader.calls == 1  # not tried while it rests
    reader.failure = None
    clock.now += 1
    assert where(r) == "reader"
    assert r.take_fallbacks() == 1
    assert r.take_fallbacks() == 0


def test_a_statement_timeout_on_the_reader_is_not_retried_on_the_writer() -> None:
    r, writer, reader, _ = router()
    reader.failure = StatementTimeout("recall query exceeded statement_timeout (2000 ms)")
    with pytest.raises(StatementTimeout):
        where(r)
    assert writer.calls == 0
    assert r.reader_usable


def test_the_reader_needs_a_writer_of_the_same_kind() -> None:
    assert reader_settings(Settings()) is None
    by_url = reader_settings(Settings(database_url="postgresql://w/db", database_reader_url="postgresql://r/db"))
    assert by_url is not None and by_url.database_url is not None
    assert by_url.database_url.get_secret_value() == "postgresql://r/db"
    by_host = reader_settings(Settings(db_host="writer.example", db_reader_host="reader.example", db_iam_auth=True))
    assert by_host is not None and (by_host.db_host, by_host.db_iam_auth) == ("reader.example", True)
    with pytest.raises(ConfigurationError, match="DATABASE_URL"):
        reader_settings(Settings(database_reader_url="postgresql://r/db"))
    with pytest.raises(ConfigurationError, match="DB_HOST"):
        reader_settings(Settings(database_url="postgresql://w/db", db_reader_host="reader.example"))
    assert reader_settings(Settings(db_host="writer.example", db_reader_host="")) is None


# ---- bounded staleness: the router's decisions, the reader's replay as a fake reports it ---------


class Replica(Endpoint):
    """A reader that reports a replay position and lag when asked, and answers reads with its name."""

    def __init__(self) -> None:
        super().__init__("reader")
        self.replayed = 0x100
        self.lag_s = 0.0
        self.measures = 0

    def run(self, work: Callable[[Any], Any], *, retry: bool = True, deadline_s: float | None = None) -> Any:
        if getattr(work, "__name__", "") != "_measure":
            return super().run(work, retry=retry, deadline_s=deadline_s)
        self.measures += 1
        replica = self

        class Conn:
            def execute(self, query: str) -> Conn:
                return self

            def fetchone(self) -> tuple[str, float]:
                return f"0/{replica.replayed:X}", replica.lag_s

        return work(Conn())


class Primary(Endpoint):
    def __init__(self) -> None:
        super().__init__("writer")
        self.position = 0x200

    def run(self, work: Callable[[Any], Any], *, retry: bool = True, deadline_s: float | None = None) -> Any:
        if getattr(work, "__name__", "") == "writer_lsn":
            return self.position
        return super().run(work, retry=retry, deadline_s=deadline_s)


def bounded() -> tuple[ReadRouter, Primary, Replica, Clock]:
    writer, reader, clock = Primary(), Replica(), Clock()
    r = ReadRouter(
        writer,  # type: ignore[arg-type]
        reader,  # type: ignore[arg-type]
        retry_after_s=30,
        max_lag_s=1.0,
        lag_check_s=0.5,
        read_your_writes_s=1.5,
        clock=clock,
    )
    return r, writer, reader, clock


def read_for(r: ReadRouter, user: str) -> str:
    result: str = r.run(lambda name: name, user_id=user)
    return result


def test_a_users_reads_stay_on_the_writer_for_the_window_after_their_write() -> None:
    r, _, _, clock = bounded()
    r.wrote("u1")
    assert (read_for(r, "u1"), read_for(r, "u2")) == ("writer", "reader")
    clock.now += 1.6
    assert read_for(r, "u1") == "reader"
    assert r.kept_fresh == {"own_write": 1}


def test_past_the_lag_bound_reads_go_to_the_writer_and_the_measure_is_reused() -> None:
    r, _, reader, clock = bounded()
    reader.lag_s = 5.0
    assert read_for(r, "u1") == "writer"
    assert read_for(r, "u2") == "writer"
    assert reader.measures == 1  # reused within lag_check_s
    reader.lag_s = 0.2
    assert read_for(r, "u1") == "writer"
    clock.now += 0.5
    assert read_for(r, "u1") == "reader"
    assert reader.measures == 2


def test_an_erased_user_reads_the_writer_until_the_reader_replayed_past_the_erasure() -> None:
    r, writer, reader, clock = bounded()
    writer.position = 0x200
    r.erased("u1")
    clock.now += 3600  # long after any time window
    assert read_for(r, "u1") == "writer"  # the reader is at 0/100
    reader.replayed = 0x1FF
    clock.now += 1
    assert read_for(r, "u1") == "writer"
    reader.replayed = 0x200
    assert read_for(r, "u1") == "reader"  # measured again on the user's read: replayed
    assert r.kept_fresh == {"erasure": 2}
