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

-- The text leg of a dense user. Under row-level security PostgreSQL never evaluates a function
-- that is not LEAKPROOF (tsvector @@ is not) before the policy, so the application's own query
-- cannot use a GIN index: it reads every row of the user and filters (hundreds of ms at 100,000
-- memories). This function runs as agent_memory_maintenance (whose policy admits every row, so
-- the planner may take the user's GIN index) and applies the tenant rule itself: only the user
-- of the caller's transaction (agent_memory.user_id; none: nothing), with the same scope and
-- filters as the application's queries (agent_memory.db.scope, agent_memory.db.filters). It
-- returns ids only. The query is built with its values (EXECUTE), so the planner sees the user
-- id (the partial index's predicate) and how rare the words are.
-- The maintenance role owns it, so it needs CREATE on the schema for this statement only.
DO $$
DECLARE
    schema_name text := current_schema();
BEGIN
    EXECUTE format('GRANT CREATE ON SCHEMA %I TO agent_memory_maintenance', schema_name);
    SET LOCAL ROLE agent_memory_maintenance;
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION agent_memory_dense_text_leg(
            q tsquery, k integer, p_project_id text, p_now timestamptz, p_include_inactive boolean,
            p_categories text[], p_metadata jsonb, p_created_after timestamptz, p_created_before timestamptz
        ) RETURNS TABLE (id uuid)
        LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = %I, pg_temp AS $body$
        DECLARE
            scoped_user text := nullif(current_setting('agent_memory.user_id', true), '');
        BEGIN
            IF scoped_user IS NULL OR q IS NULL THEN
                RETURN;
            END IF;
            RETURN QUERY EXECUTE
                format('SELECT m.id FROM user_memories m WHERE m.user_id = %%L AND m.content_tsv @@ %%L::tsquery',
                       scoped_user, q)
                || CASE WHEN p_project_id IS NULL THEN ''
                        ELSE format(' AND (m.project_id = %%L OR m.project_id IS NULL)', p_project_id) END
                || CASE WHEN p_include_inactive THEN ''
                        ELSE format(' AND m.superseded_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > %%L)',
                                    coalesce(p_now, now())) END
                || CASE WHEN p_now IS NULL THEN '' ELSE format(' AND m.created_at <= %%L', p_now) END
                || CASE WHEN p_categories IS NULL THEN ''
                        ELSE format(' AND m.category = ANY(%%L::text[])', p_categories) END
                || CASE WHEN p_metadata IS NULL THEN '' ELSE format(' AND m.metadata @> %%L::jsonb', p_metadata) END
                || CASE WHEN p_created_after IS NULL THEN ''
                        ELSE format(' AND m.created_at >= %%L', p_created_after) END
                || CASE WHEN p_created_before IS NULL THEN ''
                        ELSE format(' AND m.created_at < %%L', p_created_before) END
                || format(' ORDER BY ts_rank_cd(m.content_tsv, %%L::tsquery) DESC, m.updated_at DESC, m.content'
                          ' LIMIT %%s', q, k);
        END
        $body$
    $f$, schema_name);
    RESET ROLE;
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM agent_memory_maintenance', schema_name);
END
$$;
REVOKE ALL ON FUNCTION agent_memory_dense_text_leg(tsquery, integer, text, timestamptz, boolean, text[], jsonb,
                                                   timestamptz, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory_dense_text_leg(tsquery, integer, text, timestamptz, boolean, text[], jsonb,
                                                      timestamptz, timestamptz) TO agent_memory_app;
