-- Every function of the schema and the triggers that call them, as they are now. The migrate step
-- (rushmem.store.schema.migrate) runs this file after the numbered migrations whenever one was
-- applied or this file changed (its SHA-256 is kept in agent_memory_migrations), so a change to a
-- function is an edit here, not a new migration copying it. Everything here must run again on the
-- current schema unchanged: CREATE OR REPLACE, grants, CREATE OR REPLACE TRIGGER. See
-- docs/development.md for what CREATE OR REPLACE cannot change (a function's result type, its
-- parameters' names, dropping one).

-- ---- The history of every change to a memory (memory_events, 0002) ----------------------------
-- Recorded by a trigger, so no write path can forget it. The writer may name the change's source
-- and reason for the current transaction with set_config('agent_memory.change_source' /
-- 'agent_memory.change_reason', ..., true). 'updated' (an edit in place): one event with the
-- previous value of each field that changed; the previous metadata is stored as what changed
-- (agent_memory_metadata_patch) and read whole again (agent_memory_metadata_fold). A deletion removes the memory's text from its
-- history and from the outbox (and a held write's approved as it): the tombstone says when, at whose request and by which write
-- (0012). 'merged': consolidation marks a duplicate replaced by the memory it duplicates.
-- An 'updated' event's previous metadata, stored as what changed. A memory with 16,000 characters
-- of metadata edited a key at a time kept 16 KB an event as whole copies; now one key's worth.
-- detail.previous holds either 'metadata' (the whole object: a checkpoint) or 'metadata_patch'
-- ({"set": {key: value}, "unset": [key]}: the previous metadata as a change of the one recorded by
-- the memory's last event that recorded one). A memory's first such event, every 32nd, and any
-- whose patch would not be smaller are checkpoints, so a write folds at most 31 patches and a
-- reader never needs an event before the memory's latest checkpoint. Patches are exact (a value
-- set to JSON null is set, not removed), unlike RFC 7396's merge patch.
CREATE OR REPLACE FUNCTION agent_memory_metadata_step(state jsonb, previous jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN previous ? 'metadata' THEN previous -> 'metadata'
        WHEN previous ? 'metadata_patch' THEN
            (coalesce(state, '{}'::jsonb)
                - ARRAY(SELECT jsonb_array_elements_text(previous -> 'metadata_patch' -> 'unset')))
            || coalesce(previous -> 'metadata_patch' -> 'set', '{}'::jsonb)
        ELSE state
    END
$$;

-- Over a memory's events in order (at, id), each event's previous metadata whole: the fold of the
-- patches from the latest checkpoint (as a window: PARTITION BY memory_id ORDER BY at, id).
CREATE OR REPLACE AGGREGATE agent_memory_metadata_fold(jsonb) (
    SFUNC = agent_memory_metadata_step,
    STYPE = jsonb
);

-- The last text before: an 'updated' event that left the content as it was stores none (a
-- memory's every other event holds its text), and a reader takes its memory's latest one before it
-- (as a window: PARTITION BY memory_id ORDER BY at, id).
CREATE OR REPLACE FUNCTION agent_memory_latest_step(state text, content text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT coalesce(content, state)
$$;

CREATE OR REPLACE AGGREGATE agent_memory_latest(text) (
    SFUNC = agent_memory_latest_step,
    STYPE = text
);

-- {"set": ..., "unset": [...]} that turns ``base`` into ``target`` (two objects).
CREATE OR REPLACE FUNCTION agent_memory_metadata_patch(base jsonb, target jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT jsonb_build_object(
        'set', coalesce((SELECT jsonb_object_agg(t.key, t.value) FROM jsonb_each(target) t
                         WHERE NOT base ? t.key OR base -> t.key IS DISTINCT FROM t.value), '{}'::jsonb),
        'unset', coalesce((SELECT jsonb_agg(b.key) FROM jsonb_each(base) b WHERE NOT target ? b.key), '[]'::jsonb))
$$;

-- What an 'updated' event of this memory stores of its previous metadata ``old``: {"metadata": old}
-- (a checkpoint) or {"metadata_patch": ...} against the previous metadata its last event recorded.
CREATE OR REPLACE FUNCTION agent_memory_previous_metadata(p_user text, p_memory uuid, old jsonb) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    chain jsonb[];
    last  int;
    base  jsonb;
    patch jsonb;
BEGIN
    IF jsonb_typeof(old) <> 'object' THEN
        RETURN jsonb_build_object('metadata', old);
    END IF;
    SELECT array_agg(e.previous ORDER BY e.at, e.id) INTO chain FROM (
        SELECT detail -> 'previous' AS previous, at, id FROM memory_events
        WHERE user_id = p_user AND memory_id = p_memory AND event = 'updated'
          AND detail -> 'previous' ?| ARRAY['metadata', 'metadata_patch']
        ORDER BY at DESC, id DESC LIMIT 32) e;
    -- The latest checkpoint among the last 32, and the fold of the patches since.
    FOR i IN REVERSE coalesce(array_length(chain, 1), 0)..1 LOOP
        IF chain[i] ? 'metadata' THEN
            last := i;
            EXIT;
        END IF;
    END LOOP;
    IF last IS NULL OR array_length(chain, 1) - last >= 31 THEN
        RETURN jsonb_build_object('metadata', old);
    END IF;
    FOR i IN last..array_length(chain, 1) LOOP
        base := agent_memory_metadata_step(base, chain[i]);
    END LOOP;
    IF jsonb_typeof(base) <> 'object' THEN
        RETURN jsonb_build_object('metadata', old);
    END IF;
    patch := agent_memory_metadata_patch(base, old);
    IF octet_length(patch::text) >= octet_length(old::text) THEN
        RETURN jsonb_build_object('metadata', old);
    END IF;
    RETURN jsonb_build_object('metadata_patch', patch);
END;
$$;

CREATE OR REPLACE FUNCTION agent_memory_record_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    reason   text := nullif(current_setting('agent_memory.change_reason', true), '');
    src      text := nullif(current_setting('agent_memory.change_source', true), '');
    wid      uuid := nullif(current_setting('agent_memory.write_id', true), '')::uuid;
    previous jsonb := '{}'::jsonb;
    gone     uuid[];
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, detail, write_id)
        VALUES (NEW.id, NEW.user_id, NEW.project_id, 'created', coalesce(src, NEW.source), NEW.content,
                jsonb_build_object('created_at', NEW.created_at), coalesce(wid, NEW.write_id));
        RETURN NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        IF reason = 'updated' THEN
            IF NEW.content IS DISTINCT FROM OLD.content THEN
                previous := previous || jsonb_build_object('content', OLD.content);
            END IF;
            IF NEW.category IS DISTINCT FROM OLD.category THEN
                previous := previous || jsonb_build_object('category', OLD.category);
            END IF;
            IF NEW.metadata IS DISTINCT FROM OLD.metadata THEN
                previous := previous || agent_memory_previous_metadata(NEW.user_id, NEW.id, OLD.metadata);
            END IF;
            IF NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
                previous := previous || jsonb_build_object('expires_at', OLD.expires_at);
            END IF;
            IF NEW.is_evergreen IS DISTINCT FROM OLD.is_evergreen THEN
                previous := previous || jsonb_build_object('is_evergreen', OLD.is_evergreen);
            END IF;
            IF previous <> '{}'::jsonb THEN
                INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, detail, write_id)
                -- The text after the edit only when the edit changed it: readers take it from
                -- the memory's event before (agent_memory_latest) otherwise.
                VALUES (NEW.id, NEW.user_id, NEW.project_id, 'updated', src,
                        CASE WHEN previous ? 'content' THEN NEW.content END,
                        jsonb_build_object('previous', previous), wid);
            END IF;
            RETURN NEW;
        END IF;
        IF OLD.superseded_at IS NULL AND NEW.superseded_at IS NOT NULL THEN
            INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, related_id, write_id)
            VALUES (NEW.id, NEW.user_id, NEW.project_id,
                    CASE WHEN reason = 'merged' THEN 'merged' ELSE 'superseded' END,
                    src, NEW.content, NEW.superseded_by, wid);
        ELSIF OLD.superseded_at IS NOT NULL AND NEW.superseded_at IS NULL THEN
            INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, write_id)
            VALUES (NEW.id, NEW.user_id, NEW.project_id, 'revived', src, NEW.content, wid);
        ELSIF NEW.updated_at > OLD.updated_at THEN
            INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, detail, write_id)
            VALUES (NEW.id, NEW.user_id, NEW.project_id, 'refreshed', src, NEW.content,
                    jsonb_build_object('updated_at', NEW.updated_at), wid);
        END IF;
        IF NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
            INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, detail, write_id)
            VALUES (NEW.id, NEW.user_id, NEW.project_id, 'expiry_changed', src, NEW.content,
                    jsonb_build_object('expires_at', NEW.expires_at), wid);
        END IF;
        RETURN NEW;
    ELSE
        -- Forgetting a user removes their history as well: nothing to record.
        IF reason = 'forget_user' THEN
            RETURN OLD;
        END IF;
        IF reason IN ('expired', 'purged') THEN
            INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, write_id)
            VALUES (OLD.id, OLD.user_id, OLD.project_id, reason, src, OLD.content, wid);
            RETURN OLD;
        END IF;
        -- A deletion: the memory's text goes from its history and from the outbox, and so does the
        -- text of a held write approved as this memory (0016: its events are under the pending id);
        -- the tombstone says when, at whose request and by which write, not what. Deleting one
        -- memory deletes its earlier versions with it (rushmem.store.memories.catalog), each a row here.
        gone := OLD.id || ARRAY(SELECT a.memory_id FROM memory_events a
                                WHERE a.user_id = OLD.user_id AND a.event = 'approved' AND a.related_id = OLD.id);
        UPDATE memory_events
        SET content = NULL,
            detail = CASE WHEN detail ? 'previous'
                          THEN jsonb_set(detail, '{previous}',
                                         (detail -> 'previous') - 'content' - 'metadata' - 'metadata_patch')
                          ELSE detail END
        WHERE user_id = OLD.user_id AND memory_id = ANY(gone)
          AND (content IS NOT NULL OR detail -> 'previous' ?| ARRAY['content', 'metadata', 'metadata_patch']);
        UPDATE change_outbox SET content = NULL
        WHERE user_id = OLD.user_id AND memory_id = ANY(gone) AND content IS NOT NULL;
        INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, write_id)
        VALUES (OLD.id, OLD.user_id, OLD.project_id, 'deleted', src, NULL, wid);
        RETURN OLD;
    END IF;
END;
$$;

CREATE OR REPLACE TRIGGER user_memories_history
    AFTER INSERT OR UPDATE OR DELETE ON user_memories
    FOR EACH ROW EXECUTE FUNCTION agent_memory_record_event();

-- ---- Dependents go stale (depends_on, 0023) ----------------------------------------------------
-- A memory superseded or deleted while current makes every current memory that names it in
-- depends_on stale, in the same statement's transaction, whichever path superseded or deleted it
-- (a write, an edit, consolidation, a delete, a purge of an expired memory). A row trigger with a
-- WHEN clause: it runs only for those rows, one probe of the partial GIN index each. Forgetting a
-- user deletes the dependents too: nothing to mark.
CREATE OR REPLACE FUNCTION agent_memory_mark_dependents() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('agent_memory.change_reason', true) = 'forget_user' THEN
        RETURN NULL;
    END IF;
    UPDATE user_memories
    SET stale_at = now(), stale_because = OLD.id,
        stale_reason = CASE WHEN TG_OP = 'DELETE' THEN 'deleted' ELSE 'superseded' END
    WHERE user_id = OLD.user_id AND depends_on <> '{}' AND depends_on @> ARRAY[OLD.id]
      AND superseded_at IS NULL AND stale_at IS NULL AND id <> OLD.id;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER user_memories_dependents_superseded
    AFTER UPDATE OF superseded_at ON user_memories
    FOR EACH ROW WHEN (OLD.superseded_at IS NULL AND NEW.superseded_at IS NOT NULL)
    EXECUTE FUNCTION agent_memory_mark_dependents();
CREATE OR REPLACE TRIGGER user_memories_dependents_deleted
    AFTER DELETE ON user_memories
    FOR EACH ROW WHEN (OLD.superseded_at IS NULL)
    EXECUTE FUNCTION agent_memory_mark_dependents();

-- The row's write id: the transaction's (agent_memory.write_id), unless the statement sets one
-- itself (a restore).
CREATE OR REPLACE FUNCTION agent_memory_stamp_write() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    wid uuid := nullif(current_setting('agent_memory.write_id', true), '')::uuid;
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.write_id := coalesce(NEW.write_id, wid);
    ELSIF NEW.write_id IS NOT DISTINCT FROM OLD.write_id THEN
        NEW.write_id := coalesce(wid, OLD.write_id);
    END IF;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE TRIGGER user_memories_write_id
    BEFORE INSERT OR UPDATE ON user_memories
    FOR EACH ROW EXECUTE FUNCTION agent_memory_stamp_write();

-- A new content makes the shadow vectors of a re-embedding stale: they are cleared, so the
-- re-embedding run (or its switch) embeds the new content. Those columns exist only while one runs
-- (embedding_next) or during its grace period (embedding_prev), so they are reached through the
-- row as JSON, not by name.
CREATE OR REPLACE FUNCTION agent_memory_content_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    shadow jsonb := '{}'::jsonb;
    row_json jsonb;
BEGIN
    IF NEW.content IS DISTINCT FROM OLD.content THEN
        row_json := to_jsonb(NEW);
        IF row_json ? 'embedding_next' THEN
            shadow := shadow || '{"embedding_next": null}'::jsonb;
        END IF;
        IF row_json ? 'embedding_prev' THEN
            shadow := shadow || '{"embedding_prev": null}'::jsonb;
        END IF;
        IF shadow <> '{}'::jsonb THEN
            NEW := jsonb_populate_record(NEW, shadow);
        END IF;
    END IF;
    RETURN NEW;
END;
$$;

CREATE OR REPLACE TRIGGER user_memories_content_changed
    BEFORE UPDATE OF content ON user_memories
    FOR EACH ROW EXECUTE FUNCTION agent_memory_content_changed();

-- ---- The outbox of change events (change_outbox, 0009) ----------------------------------------
-- Written only when the transaction says set_config('agent_memory.outbox', 'ids' | 'content', true).
-- A forgotten memory's event carries no text; every event names the write behind it
-- (detail.write_id) when there is one.
CREATE OR REPLACE FUNCTION agent_memory_outbox_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    mode   text := current_setting('agent_memory.outbox', true);
    reason text := nullif(current_setting('agent_memory.change_reason', true), '');
    src    text := nullif(current_setting('agent_memory.change_source', true), '');
    wid    text := nullif(current_setting('agent_memory.write_id', true), '');
    kind   text;
    m      user_memories;
BEGIN
    IF TG_OP = 'INSERT' THEN
        m := NEW;
        kind := 'memory.created';
    ELSIF TG_OP = 'UPDATE' THEN
        m := NEW;
        IF OLD.superseded_at IS NULL AND NEW.superseded_at IS NOT NULL THEN
            kind := 'memory.superseded';
        ELSIF OLD.superseded_at IS NOT NULL AND NEW.superseded_at IS NULL THEN
            kind := 'memory.revived';
        ELSIF NEW.updated_at > OLD.updated_at THEN
            kind := 'memory.refreshed';
        ELSE
            RETURN NULL;  -- a redelivery, an expiry or a re-embedding: nothing a consumer acts on
        END IF;
    ELSE
        -- Forgetting a user sends one 'user.erased' event (written with the erasure), not one per memory.
        IF reason = 'forget_user' THEN
            RETURN NULL;
        END IF;
        m := OLD;
        kind := CASE WHEN reason = 'expired' THEN 'memory.expired'
                     WHEN reason = 'purged' THEN 'memory.purged'
                     ELSE 'memory.forgotten' END;
    END IF;
    INSERT INTO change_outbox (user_id, event, memory_id, project_id, category, related_id, source, content, detail)
    VALUES (m.user_id, kind, m.id, m.project_id, m.category,
            CASE WHEN kind = 'memory.superseded' THEN m.superseded_by END,
            coalesce(src, m.source),
            CASE WHEN mode = 'content' AND kind <> 'memory.forgotten' THEN m.content END,
            CASE WHEN wid IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('write_id', wid) END);
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER user_memories_outbox
    AFTER INSERT OR UPDATE OR DELETE ON user_memories
    FOR EACH ROW
    WHEN (current_setting('agent_memory.outbox', true) IN ('ids', 'content'))
    EXECUTE FUNCTION agent_memory_outbox_change();

-- ---- Writes waiting for review (pending_memories, 0016) ---------------------------------------
-- The history and the change events of a pending write. The decision is the transaction's change
-- reason ('approved' or 'rejected'); an approval's memory is agent_memory.approved_as. A rejected
-- write's text leaves its history, as a deleted memory's does.
CREATE OR REPLACE FUNCTION agent_memory_pending_change() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    mode     text := current_setting('agent_memory.outbox', true);
    reason   text := nullif(current_setting('agent_memory.change_reason', true), '');
    src      text := nullif(current_setting('agent_memory.change_source', true), '');
    wid      uuid := nullif(current_setting('agent_memory.write_id', true), '')::uuid;
    approved uuid := nullif(current_setting('agent_memory.approved_as', true), '')::uuid;
    kind     text;
    p        pending_memories;
BEGIN
    IF TG_OP = 'INSERT' THEN
        p := NEW;
        kind := 'pending';
        INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, detail, write_id)
        VALUES (p.id, p.user_id, p.project_id, 'pending', coalesce(src, p.source), p.content,
                jsonb_build_object('reasons', to_jsonb(p.reasons)), coalesce(wid, p.write_id));
    ELSE
        p := OLD;
        IF reason = 'forget_user' THEN
            RETURN NULL;
        END IF;
        kind := CASE WHEN reason = 'approved' THEN 'approved' ELSE 'rejected' END;
        IF kind = 'rejected' THEN
            UPDATE memory_events SET content = NULL
            WHERE user_id = p.user_id AND memory_id = p.id AND content IS NOT NULL;
        END IF;
        INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, related_id, write_id)
        VALUES (p.id, p.user_id, p.project_id, kind, src,
                CASE WHEN kind = 'approved' THEN p.content END,
                CASE WHEN kind = 'approved' THEN approved END, wid);
    END IF;
    IF mode IN ('ids', 'content') THEN
        INSERT INTO change_outbox (user_id, event, memory_id, project_id, category, related_id, source, content, detail)
        VALUES (p.user_id, 'memory.' || kind, p.id, p.project_id, p.category,
                CASE WHEN kind = 'approved' THEN approved END,
                coalesce(src, p.source),
                CASE WHEN mode = 'content' AND kind <> 'rejected' THEN p.content END,
                jsonb_build_object('reasons', to_jsonb(p.reasons))
                    || CASE WHEN wid IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('write_id', wid) END);
    END IF;
    RETURN NULL;
END;
$$;

CREATE OR REPLACE TRIGGER pending_memories_changes
    AFTER INSERT OR DELETE ON pending_memories
    FOR EACH ROW EXECUTE FUNCTION agent_memory_pending_change();

-- ---- Dense users' copy (dense_memories, 0013) --------------------------------------------------
-- The copy follows user_memories, for users listed in agent_memory_dense_users only. INSERT and
-- UPDATE go through the parent (tuple routing opens only the user's partition); an upsert, because
-- UPDATE ... FROM a transition table could not name the user by value and would be planned over
-- every partition. DELETE names each user by value (EXECUTE plans it with the value: one partition).
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

CREATE OR REPLACE TRIGGER user_memories_dense_insert AFTER INSERT ON user_memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_dense_copy();
CREATE OR REPLACE TRIGGER user_memories_dense_update AFTER UPDATE ON user_memories
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_dense_copy();
CREATE OR REPLACE TRIGGER user_memories_dense_delete AFTER DELETE ON user_memories
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION agent_memory_dense_copy();

-- The text leg of a dense user. Under row-level security PostgreSQL never evaluates a function that
-- is not LEAKPROOF (tsvector @@ is not) before the policy, so the application's own query cannot use
-- a GIN index. This function runs as agent_memory_maintenance (whose policy admits every row, so the
-- planner may take the user's partition and its GIN index) and applies the tenant rule itself: only
-- the user of the caller's transaction (agent_memory.user_id; none: nothing), current as of p_now
-- (valid then, 0019), with the filters as data: p_filters, one jsonb array, a row per filter
-- (rushmem.store.memories.filters.FILTERS), each applied only when it compares one column with the
-- value, which it quotes itself (0014). It returns ids only. The query is built with its values
-- (EXECUTE), so the planner sees the user id and how rare the words are.
-- The first signature (a parameter per filter, 0005/0013) is kept for processes of versions before
-- 0014 while a deploy rolls out; dropping it is a DROP FUNCTION here.
-- The maintenance role owns them, so it replaces them and grants on them (an owner whose membership
-- in it does not inherit could not), with CREATE on the schema for this block only.
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
    REVOKE ALL ON FUNCTION agent_memory_dense_text_leg(
        tsquery, integer, text, timestamptz, boolean, text[], jsonb, timestamptz, timestamptz) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION agent_memory_dense_text_leg(
        tsquery, integer, text, timestamptz, boolean, text[], jsonb, timestamptz, timestamptz) TO agent_memory_app;
    REVOKE ALL ON FUNCTION agent_memory_dense_text_leg(tsquery, integer, text, timestamptz, boolean, jsonb) FROM PUBLIC;
    GRANT EXECUTE ON FUNCTION agent_memory_dense_text_leg(tsquery, integer, text, timestamptz, boolean, jsonb)
        TO agent_memory_app;
    RESET ROLE;
    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM agent_memory_maintenance', schema_name);
END
$$;

-- ---- One statement per read over the RDS Data API (0017) ---------------------------------------
-- Through the Data API every statement is an HTTPS request; a read under row-level security needed
-- four (begin, the scope, the query, commit). This carries the scope into the statement: it sets
-- the given settings for the statement's own transaction (is_local), then runs the query (its
-- parameters in $1, a jsonb object of text values) and returns its rows, each as one jsonb value.
-- SECURITY INVOKER: the policies bind it exactly as they bind the query sent alone; it only saves
-- the round trips. (statement_timeout cannot be set from inside a running statement: the Data API
-- login has its own, set on the role.)
CREATE OR REPLACE FUNCTION agent_memory_read_as(settings jsonb, query text, params jsonb)
RETURNS SETOF jsonb
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
DECLARE
    name text;
    value text;
BEGIN
    FOR name, value IN SELECT key, s.value FROM jsonb_each_text(settings) AS s LOOP
        PERFORM set_config(name, value, true);
    END LOOP;
    RETURN QUERY EXECUTE query USING params;
END
$$;

REVOKE ALL ON FUNCTION agent_memory_read_as(jsonb, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory_read_as(jsonb, text, jsonb) TO agent_memory_app, agent_memory_maintenance;

-- ---- One statement per write over the RDS Data API --------------------------------------------
-- A write planned on a read made before it (a conversation's: its nearest memories, read in one
-- request, judged in the application), sent as one request: the settings set for the statement's
-- own transaction (the user first), the user's writer lock and the shared lock of the vector schema
-- taken, then ``guard`` run again under them (its parameters in expected->'params') and compared with
-- what the plan was made on (expected->'value'): if anything it read changed in between (a
-- concurrent write, the receipt of a redelivery, a switch of models) nothing is written and it
-- raises serialization_failure, and the caller writes through a transaction of its own instead. Then
-- each of ``statements`` ({query, params, returns}) runs in order, each seeing the ones before it;
-- the rows of those that return some come back as (its place, the row as json: its columns in order). Through the Data API
-- a transaction of begin, the scope, the checks, the statements and commit was a request each.
-- SECURITY INVOKER: the policies bind every statement as they would bind it sent alone.
CREATE OR REPLACE FUNCTION agent_memory_write_as(
    settings jsonb, lock_key text, schema_lock bigint, guard text, expected jsonb, statements jsonb
)
RETURNS TABLE (am_statement integer, am_doc json)
LANGUAGE plpgsql VOLATILE SECURITY INVOKER
AS $$
DECLARE
    name text;
    value text;
    seen jsonb;
    s jsonb;
    n integer := 0;
BEGIN
    FOR name, value IN SELECT key, e.value FROM jsonb_each_text(settings) AS e LOOP
        PERFORM set_config(name, value, true);
    END LOOP;
    PERFORM pg_advisory_xact_lock(hashtextextended(lock_key, 7));
    IF schema_lock IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock_shared(schema_lock);
    END IF;
    -- A statement of its own: its snapshot is taken after the locks (READ COMMITTED).
    EXECUTE guard INTO seen USING expected -> 'params';
    IF seen IS DISTINCT FROM expected -> 'value' THEN
        RAISE EXCEPTION 'what this write was planned on changed before it was written'
            USING ERRCODE = 'serialization_failure';
    END IF;
    FOR s IN SELECT e FROM jsonb_array_elements(statements) AS e LOOP
        n := n + 1;
        IF (s ->> 'returns')::boolean THEN
            RETURN QUERY EXECUTE format('WITH r AS (%s) SELECT %s, row_to_json(r) FROM r', s ->> 'query', n)
                USING s -> 'params';
        ELSE
            EXECUTE s ->> 'query' USING s -> 'params';
        END IF;
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION agent_memory_write_as(jsonb, text, bigint, text, jsonb, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION agent_memory_write_as(jsonb, text, bigint, text, jsonb, jsonb)
    TO agent_memory_app, agent_memory_maintenance;
