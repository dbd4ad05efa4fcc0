-- Current means valid now. A version replaced by one that becomes true later (valid_from in the
-- future) stays current until then, and that replacement is not current before it: recall, list
-- and every door without as_of answer what as_of = now answers. The scope of a current read
-- (agent_memory.store.memories.scope) asks for valid_from and valid_until, so dense users' copies
-- (0013) carry them too, kept in step by the copy trigger, and the dense text leg (0014) applies
-- the same rule. A dense row copied before this migration has neither: it counts as valid from its
-- start and, once superseded, as ended (what it was before), until `agent-memory dense-users`
-- refills the partition or the row is written again. Adding two nullable columns rewrites nothing.
ALTER TABLE dense_memories ADD COLUMN IF NOT EXISTS valid_from timestamptz;
ALTER TABLE dense_memories ADD COLUMN IF NOT EXISTS valid_until timestamptz;

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
                                     expires_at, superseded_at, embedding, content_tsv, valid_from, valid_until)
    SELECT n.user_id, n.id, n.project_id, n.category, n.metadata, n.created_at, n.updated_at,
           n.expires_at, n.superseded_at, n.embedding, n.content_tsv, n.valid_from, n.valid_until
    FROM new_rows n
    WHERE EXISTS (SELECT FROM agent_memory_dense_users d WHERE d.user_id = n.user_id)
    ON CONFLICT (user_id, id) DO UPDATE SET
        project_id = EXCLUDED.project_id, category = EXCLUDED.category, metadata = EXCLUDED.metadata,
        created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, expires_at = EXCLUDED.expires_at,
        superseded_at = EXCLUDED.superseded_at, embedding = EXCLUDED.embedding,
        content_tsv = EXCLUDED.content_tsv, valid_from = EXCLUDED.valid_from, valid_until = EXCLUDED.valid_until;
    RETURN NULL;
END;
$$;

-- The dense text leg with the same rule (same signature: its grants stay).
DO $$
DECLARE
    schema_name text := current_schema();
BEGIN
    EXECUTE format('GRANT CREATE ON SCHEMA %I TO agent_memory_maintenance', schema_name);
    SET LOCAL ROLE agent_memory_maintenance;
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION agent_memory_dense_text_leg(
            q tsquery, k integer, p_project_id text, p_now timestamptz, p_include_inactive boolean,
            p_filters jsonb
        ) RETURNS TABLE (id uuid)
        LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = %I, pg_temp AS $body$
        DECLARE
            scoped_user text := nullif(current_setting('agent_memory.user_id', true), '');
            conditions text := '';
            f jsonb;
            value_type regtype;
        BEGIN
            IF scoped_user IS NULL OR q IS NULL THEN
                RETURN;
            END IF;
            FOR f IN SELECT * FROM jsonb_array_elements(coalesce(p_filters, '[]'::jsonb)) LOOP
                -- A type name only (to_regtype raises on anything else), then one that exists.
                value_type := CASE WHEN f->>'type' ~ '^[a-z][a-z0-9_ ]*(\[\])?$' THEN to_regtype(f->>'type') END;
                IF value_type IS NULL OR coalesce(f->>'condition', '')
                        !~ '^[a-z_]+ (=|<>|<|<=|>|>=|@>|<@|&&) (\{\}|(ANY|ALL)\(\{\}\))$' THEN
                    RAISE EXCEPTION 'not a filter of the dense text leg: %%', f
                        USING ERRCODE = 'invalid_parameter_value';
                END IF;
                conditions := conditions || ' AND m.'
                    || replace(f->>'condition', '{}', format('%%L::%%s', f->>'value', value_type));
            END LOOP;
            RETURN QUERY EXECUTE
                format('SELECT m.id FROM dense_memories m WHERE m.user_id = %%L AND m.content_tsv @@ %%L::tsquery',
                       scoped_user, q)
                || CASE WHEN p_project_id IS NULL THEN ''
                        ELSE format(' AND (m.project_id = %%L OR m.project_id IS NULL)', p_project_id) END
                || CASE WHEN p_include_inactive THEN ''
                        ELSE format(' AND (m.superseded_at IS NULL OR m.valid_until > %%1$L)'
                                    ' AND (m.valid_from IS NULL OR m.valid_from <= %%1$L)'
                                    ' AND (m.expires_at IS NULL OR m.expires_at > %%1$L)',
                                    coalesce(p_now, now())) END
                || CASE WHEN p_now IS NULL THEN '' ELSE format(' AND m.created_at <= %%L', p_now) END
                || conditions
                || format(' ORDER BY ts_rank_cd(m.content_tsv, %%L::tsquery) DESC, m.updated_at DESC, m.id'
                          ' LIMIT %%s', q, k);
        END
        $body$
    $f$, schema_name);
    RESET ROLE;
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM agent_memory_maintenance', schema_name);
END
$$;
