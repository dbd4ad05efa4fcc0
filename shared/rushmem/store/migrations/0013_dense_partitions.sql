-- Dense users' indexes move off user_memories, so they cost other users nothing.
--
-- 0005 gave each dense user two partial indexes on user_memories (WHERE user_id = ...). The planner
-- considers, and every statement locks, every index of the table, so each dense user made every
-- other user's recall and write slower (33 ms instead of 3 ms with 1,000 of them; a peer ran out
-- of the lock table at ~2,100). Here a dense user's searchable columns are copied into
-- dense_memories, a table LIST-partitioned by user_id with one partition per dense user, which
-- carries that user's HNSW and GIN indexes. A statement names the user by value, so the planner
-- prunes to that one partition (or to none for an ordinary user): what a statement plans and
-- locks no longer depends on how many users are dense. agent-memory dense-users creates, fills,
-- indexes, attaches and drops the partitions (agent_memory.store.indexes.partitions).
--
-- The copy is kept in step by statement-level triggers on user_memories, in the writing
-- transaction (durable and atomic with the write), for users listed in agent_memory_dense_users
-- only: an ordinary user's statement pays one registry probe and never opens dense_memories. Recall reads a user's partition
-- only once it is filled and indexed (ready); until then that user is searched exactly.
--
-- Lock impact on a running stack: CREATE TRIGGER takes SHARE ROW EXCLUSIVE on user_memories for
-- an instant (writes wait that long, reads do not); nothing is rewritten or scanned. Users listed
-- by 0005 are unlisted here (their recall is exact, and correct, until the next dense-users run,
-- which builds their partitions and drops 0005's partial indexes CONCURRENTLY).

-- No content column: the copy holds what the legs search and filter on, not the text.
CREATE TABLE IF NOT EXISTS dense_memories (
    user_id       text        NOT NULL,
    id            uuid        NOT NULL,
    project_id    text,
    category      text        NOT NULL,
    metadata      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    expires_at    timestamptz,
    superseded_at timestamptz,
    embedding     vector({dimension}) NOT NULL,
    content_tsv   tsvector    NOT NULL,
    PRIMARY KEY (user_id, id)
) PARTITION BY LIST (user_id);

GRANT SELECT, INSERT, UPDATE, DELETE ON dense_memories TO agent_memory_app, agent_memory_maintenance;
ALTER TABLE dense_memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE dense_memories FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS dense_memories_tenant ON dense_memories;
CREATE POLICY dense_memories_tenant ON dense_memories
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS dense_memories_maintenance ON dense_memories;
CREATE POLICY dense_memories_maintenance ON dense_memories TO agent_memory_maintenance
    USING (true) WITH CHECK (true);

-- ready: the user's partition is filled and indexed; recall and the near-duplicate check use it.
-- A listed user that is not ready yet is copied by the triggers (so the fill misses nothing).
ALTER TABLE agent_memory_dense_users ADD COLUMN IF NOT EXISTS ready boolean NOT NULL DEFAULT false;
-- As the maintenance role: FORCE ROW LEVEL SECURITY (0005) hides every row from an owner that is
-- not a superuser (the RDS master user is not), and a listed user without a partition would make
-- the copy triggers fail their writes.
DO $$
BEGIN
    SET LOCAL ROLE agent_memory_maintenance;
    DELETE FROM agent_memory_dense_users;
    RESET ROLE;
END
$$;

-- The statement-level triggers keeping the copy (agent_memory_dense_copy) are in functions.sql.

-- The dense text leg (0005) reads the user's partition from here on: its GIN index, found by
-- pruning on the user id the query is built with (functions.sql).
