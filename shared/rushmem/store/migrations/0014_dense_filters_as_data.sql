-- The dense text leg takes its filters as data: one jsonb array, a row per filter
-- (agent_memory.store.memories.filters.FILTERS), so a new filter needs no migration.
--
-- 0005/0013's function named each filter as a parameter (categories, metadata, creation window).
-- This one takes p_filters: [{"condition": "category = ANY({})", "type": "text[]", "value": "{a,b}"}, ...],
-- each value in its type's text form. It applies a condition only when it compares one column
-- with the value ("<column> <operator> {}" or "<column> <operator> ANY({})" / "ALL({})") and the
-- type is a type, and quotes the value itself, so a caller can add conditions on the rows of the
-- user the tenant rule already chose, never widen them. Columns are those of dense_memories (0013).
--
-- The previous signature stays until a later migration drops it: processes of the version before
-- this one still call it while a deploy rolls out. Nothing is rewritten or locked but the catalog.
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
                        ELSE format(' AND m.superseded_at IS NULL AND (m.expires_at IS NULL OR m.expires_at > %%L)',
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
REVOKE ALL ON FUNCTION agent_memory_dense_text_leg(tsquery, integer, text, timestamptz, boolean, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory_dense_text_leg(tsquery, integer, text, timestamptz, boolean, jsonb)
    TO agent_memory_app;
