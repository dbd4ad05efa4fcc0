"""rushmem reembed: a new model or dimension while reads go on; resumable; never a silent mix."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from rushmem.config import Settings
from rushmem.service import Memory
from rushmem_contract.errors import ConfigurationError, SchemaMismatch
from rushmem_contract.models import ImportLine, NewMemory

FACTS = [f"fact number {i} about topic {i % 7}" for i in range(25)]


def settings_for(url: str, dimension: int, **extra: object) -> Settings:
    return Settings(database_url=url, embedding_provider="hash", embedding_dimensions=dimension, **extra)  # type: ignore[arg-type]


@pytest.fixture
def old(database_url: str) -> Memory:
    # The database fixture is migrated for hash-384; this is the deployment running today.
    service = Memory(settings_for(database_url, 384, db_role="agent_memory_app"))
    service.add([NewMemory(content=f) for f in FACTS], user_id="u1")
    service.add([NewMemory(content="u2 likes topic 3")], user_id="u2")
    return service


def test_reembed_fills_in_batches_resumes_and_switches(old: Memory, database_url: str) -> None:
    new = Memory(settings_for(database_url, 256))
    first = new.admin.reembed(batch_size=10, max_batches=1)  # interrupted after one batch
    assert first.model_dump() == {
        "state": "started",
        "filled": 10,
        "switched": False,
        "model": "hash:feature-hash-v1:256",
    }

    # Reads go on from the old deployment while the new vectors are filled...
    assert len(old.recall("topic 3", user_id="u1").memories) == 10
    # ...and so do writes: rows added meanwhile are embedded before the switch.
    old.add([NewMemory(content="written during the re-embedding")], user_id="u1")

    second = new.admin.reembed(batch_size=10)
    assert second.state == "resuming" and second.switched is True
    assert second.filled == len(FACTS) + 2 - 10

    with psycopg.connect(database_url) as conn:
        (dims,) = conn.execute("SELECT DISTINCT vector_dims(embedding) FROM user_memories").fetchone()  # type: ignore[misc]
        assert dims == 256
        assert conn.execute("SELECT count(*) FROM user_memories WHERE embedding IS NULL").fetchone() == (0,)

    fresh = Memory(settings_for(database_url, 256, db_role="agent_memory_app"))
    found = fresh.recall("written during the re-embedding", user_id="u1", limit=1).memories
    assert found[0].content == "written during the re-embedding"
    fresh.add([NewMemory(content="written after the switch")], user_id="u1")
    assert [m.content for m in fresh.recall("topic", user_id="u2").memories] == ["u2 likes topic 3"]


def test_after_the_switch_the_old_deployment_reads_but_may_not_write(old: Memory, database_url: str) -> None:
    assert old.recall("topic 1", user_id="u1").memories  # connected before the switch
    Memory(settings_for(database_url, 256)).admin.reembed()
    # Its next recall notices the switch, reconnects and reads the previous vectors.
    assert len(old.recall("topic 1", user_id="u1").memories) == 10
    with pytest.raises(SchemaMismatch) as err:
        old.add([NewMemory(content="would be stored with the wrong model")], user_id="u1")
    assert "redeployed" in str(err.value)

    assert Memory(settings_for(database_url, 256)).admin.drop_previous_vectors() is True
    with pytest.raises(SchemaMismatch):
        old.recall("topic 1", user_id="u1")


def test_after_the_switch_the_old_deployment_may_not_restore_an_export_either(old: Memory, database_url: str) -> None:
    # A restored line (one with its id) carries a vector of the old model, as an added fact does.
    old.recall("topic 1", user_id="u1")
    Memory(settings_for(database_url, 256)).admin.reembed()
    old.recall("topic 1", user_id="u1")  # reconnected to the previous vectors
    exported = ImportLine(user_id="u1", id=uuid.uuid4(), content="restored with the wrong model")
    with pytest.raises(SchemaMismatch) as err:
        old.import_([exported])
    assert "redeployed" in str(err.value)


def test_same_dimension_other_model_is_never_mixed(old: Memory, database_url: str) -> None:
    old.recall("topic", user_id="u1")
    # Same size, different model: the meta check, not the dimension, must catch it.
    other = Memory(Settings(database_url=database_url, embedding_provider="hash", embedding_dimensions=384))
    assert other.admin.embedder.fingerprint == old.admin.embedder.fingerprint  # sanity: same model here
    with pytest.raises(Exception) as err:
        other.admin.reembed()
    assert "nothing to re-embed" in str(err.value)


def test_a_second_reembedding_to_another_model_needs_restart(old: Memory, database_url: str) -> None:
    Memory(settings_for(database_url, 256)).admin.reembed(batch_size=5, max_batches=1)
    other = Memory(settings_for(database_url, 128))
    with pytest.raises(Exception) as err:
        other.admin.reembed()
    assert "--restart" in str(err.value)
    result = other.admin.reembed(restart=True)
    assert result.switched is True and result.model.endswith(":128")


def test_the_application_role_cannot_reembed(old: Memory, app_login_url: str) -> None:
    as_app = Memory(settings_for(app_login_url, 256))
    with pytest.raises(ConfigurationError) as err:
        as_app.admin.reembed()
    assert "owner" in str(err.value)
    assert len(old.recall("topic", user_id="u1").memories) == 10  # nothing half-changed


def test_dense_users_search_exactly_after_the_switch_until_their_partition_is_rebuilt(
    old: Memory, database_url: str
) -> None:
    """Their partition held the previous model's vectors (migration 0013): the switch unlists them,
    and the next dense-users run builds the partition from the new vectors (another dimension here)."""
    owner = Memory(settings_for(database_url, 384))
    assert owner.admin.refresh_dense_users(min_memories=20).indexed == 1
    new = Memory(settings_for(database_url, 256))
    assert new.admin.reembed(batch_size=100).switched is True
    fresh = Memory(settings_for(database_url, 256, db_role="agent_memory_app"))
    assert len(fresh.recall("topic 3", user_id="u1", limit=30).memories) == len(FACTS)
    report = new.admin.refresh_dense_users(min_memories=20)
    assert (report.indexed, report.orphans_dropped) == (1, 1)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT DISTINCT vector_dims(embedding) FROM dense_memories").fetchall() == [(256,)]
    found = fresh.recall("fact number 3 about topic 3", user_id="u1", limit=30).memories
    assert len(found) == len(FACTS) and found[0].content == "fact number 3 about topic 3"
