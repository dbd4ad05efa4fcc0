-- Recall reads one user's rows, so its cost should follow that user's data, not the table's.
-- An ordinary user is searched exactly, through the scope b-tree (their few hundred vectors
-- are compared in well under a millisecond). A user with many memories (a "dense" user) gets
-- an HNSW and a GIN index of their own: partial indexes, WHERE user_id = that user, built and
-- dropped by `agent-memory dense-users` (agent_memory.schema.dense_users) and listed here. A
-- partial index serves only plans made with the user id's value: recall plans every query
-- with its values (plan_cache_mode = force_custom_plan), the near-duplicate check runs
-- unprepared.
--
-- No table-wide vector index: it made every write pay for a graph no ordinary user's query
-- used (the planner reads a user's rows through the b-tree instead), a query that did use it
-- walked other users' vectors, and it capped the dimension at 2,000 (3,072-d models could not
-- migrate). Databases migrated before this one had it (and re-embedding's copies): dropped.
-- This migration runs after 0006-0009 on such databases; it depends on none of them.
DROP INDEX IF EXISTS user_memories_embedding_idx;
DROP INDEX IF EXISTS user_memories_embedding_prev_idx;
DROP INDEX IF EXISTS user_memories_embedding_next_idx;

CREATE TABLE IF NOT EXISTS agent_memory_dense_users (
    user_id        text        PRIMARY KEY,
    memories       bigint      NOT NULL,   -- the user's rows when last checked
    -- Lexemes in more than a set number of the user's memories (AGENT_MEMORY_DENSE_MAX_TEXT_MATCHES):
    -- recall leaves them out of this user's full-text query, which would otherwise rank most of
    -- the user's rows; such words tell the user's memories apart little (BM25 gives them almost
    -- no weight).
    common_lexemes text[]      NOT NULL DEFAULT '{}',
    checked_at     timestamptz NOT NULL DEFAULT now()
);

-- The application reads its user's row (recall) and deletes it with the user (erasure).
GRANT SELECT, DELETE ON agent_memory_dense_users TO agent_memory_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON agent_memory_dense_users TO agent_memory_maintenance;
ALTER TABLE agent_memory_dense_users ENABLE ROW LEVEL SECURITY;
ALTER TABLE agent_memory_dense_users FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS agent_memory_dense_users_tenant ON agent_memory_dense_users;
CREATE POLICY agent_memory_dense_users_tenant ON agent_memory_dense_users
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS agent_memory_dense_users_maintenance ON agent_memory_dense_users;
CREATE POLICY agent_memory_dense_users_maintenance ON agent_memory_dense_users TO agent_memory_maintenance
    USING (true) WITH CHECK (true);

-- The text leg of a dense user (agent_memory_dense_text_leg, SECURITY DEFINER: it lets the planner
-- use the user's GIN index under row-level security) is in functions.sql.
