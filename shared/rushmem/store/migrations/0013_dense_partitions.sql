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
-- the triggers below fail their writes.
DO $$
BEGIN
    SET LOCAL ROLE agent_memory_maintenance;
    DELETE FROM agent_memory_dense_users;
    RESET ROLE;
END
$$;

-- The copy follows user_memories. INSERT and UPDATE go through the parent (tuple routing opens
-- only the user's partition); an upsert, because UPDATE ... FROM a transition table could not
-- name the user by value and would be planned over every partition. DELETE names each user by
-- value (EXECUTE plans it with the value: one partition).
CREATE OR REPLACE FUNCTION agent_memory_dense_copy() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    gone record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        FOR gone IN
            SELECT o.user_id, array_agg(o.id) AS ids FROM old_rows o
            WHERE EXISTS (SELECT FROM agent_memory_dense_users d WHERE d.user_id = o.user_id)
            GROUP BY o.user_id
        LOOP
            EXECUTE format('DELETE FROM dense_memories WHERE user_id = %L AND id = ANY(%L::uuid[])',
                           gone.user_id, gone.ids);
        END LOOP;
        RETURN NULL;
    END IF;
    -- An ordinary user's statement stops here, without opening (or locking) dense_memories.
    IF NOT EXISTS (SELECT FROM new_rows n JOIN agent_memory_dense_users d ON d.user_id = n.user_id) THEN
        RETURN NULL;
    END IF;
    INSERT INTO dense_memories AS c (user_id, id, project_id, category, metadata, created_at, updated_at,
                                     expires_at, superseded_at, embedding, content_tsv)
    SELECT n.user_id, n.id, n.project_id, n.category, n.metadata, n.created_at, n.updated_at,
           n.expires_at, n.superseded_at, n.embedding, n.content_tsv
    FROM new_rows n
    WHERE EXISTS (SELECT FROM agent_memory_dense_users d WHERE d.user_id = n.user_id)
    ON CONFLICT (user_id, id) DO UPDATE SET
        project_id = EXCLUDED.project_id, category = EXCLUDED.category, metadata = EXCLUDED.metadata,
        created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at,
        superseded_at = EXCLUDED.superseded_at, embedding = EXCLUDED.embedding,
        content_tsv = EXCLUDED.content_tsv;
    RETURN NULL;
END;
$$;

DROP TRIGGER IF EXISTS user_memories_dense_insert ON user_memories;
CREATE TRIGGER user_memories_dense_insert AFTER INSERT ON user_memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_dense_copy();
DROP TRIGGER IF EXISTS user_memories_dense_update ON user_memories;
CREATE TRIGGER user_memories_dense_update AFTER UPDATE ON user_memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_dense_copy();
DROP TRIGGER IF EXISTS user_memories_dense_delete ON user_memories;
CREATE TRIGGER user_memories_dense_delete AFTER DELETE ON user_memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_dense_copy();

-- The dense text leg (0005) reads the user's partition: its GIN index, found by pruning on the
-- user id the query is built with. Same contract: ids only, the caller's user only.
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
                format('SELECT m.id FROM dense_memories m WHERE m.user_id = %%L AND m.content_tsv @@ %%L::tsquery',
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
                || format(' ORDER BY ts_rank_cd(m.content_tsv, %%L::tsquery) DESC, m.updated_at DESC, m.id'
                          ' LIMIT %%s', q, k);
        END
        $body$
    $f$, schema_name);
    RESET ROLE;
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM agent_memory_maintenance', schema_name);
END
$$;
