-- Provenance, tombstones and merges.
--
-- 1. Write ids. Every write (a POST /memories, an import, an ingested conversation, a PATCH, a
--    consolidation run) names itself for its transaction with
--    set_config('agent_memory.write_id', '<uuid>', true). user_memories.write_id is the last
--    write that created or touched the row; memory_events.write_id the write that caused the
--    event. A restored (exported) memory keeps the write id it was exported with.
-- 2. Deleting one memory removes its content everywhere: every history event of that memory
--    loses its content (and the previous content and metadata an 'updated' event keeps), the
--    change events still waiting in the outbox lose theirs, and the 'deleted' event itself is a
--    tombstone without content (the id, the time, the source that asked, the write id). Expiry
--    and the retention purge keep the history as before; forgetting a user removes it all (0009).
-- 3. 'merged': consolidation marks a duplicate as replaced by the memory it duplicates
--    (change_reason 'merged'), which the history tells apart from a correction ('superseded').

ALTER TABLE user_memories ADD COLUMN IF NOT EXISTS write_id uuid;
ALTER TABLE memory_events ADD COLUMN IF NOT EXISTS write_id uuid;
ALTER TABLE memory_events ALTER COLUMN content DROP NOT NULL;

-- NOT VALID: every existing row already meets the wider check; no scan of the history.
ALTER TABLE memory_events DROP CONSTRAINT IF EXISTS memory_events_event_check;
ALTER TABLE memory_events ADD CONSTRAINT memory_events_event_check
    CHECK (event IN ('created', 'refreshed', 'superseded', 'merged', 'revived', 'expiry_changed', 'updated',
                     'deleted', 'expired', 'purged')) NOT VALID;

-- The row's write id: the transaction's, unless the statement sets one itself (a restore).
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

DROP TRIGGER IF EXISTS user_memories_write_id ON user_memories;
CREATE TRIGGER user_memories_write_id
    BEFORE INSERT OR UPDATE ON user_memories
    FOR EACH ROW EXECUTE FUNCTION agent_memory_stamp_write();

CREATE OR REPLACE FUNCTION agent_memory_record_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    reason   text := nullif(current_setting('agent_memory.change_reason', true), '');
    src      text := nullif(current_setting('agent_memory.change_source', true), '');
    wid      uuid := nullif(current_setting('agent_memory.write_id', true), '')::uuid;
    previous jsonb := '{}'::jsonb;
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
                previous := previous || jsonb_build_object('metadata', OLD.metadata);
            END IF;
            IF NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
                previous := previous || jsonb_build_object('expires_at', OLD.expires_at);
            END IF;
            IF NEW.is_evergreen IS DISTINCT FROM OLD.is_evergreen THEN
                previous := previous || jsonb_build_object('is_evergreen', OLD.is_evergreen);
            END IF;
            IF previous <> '{}'::jsonb THEN
                INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, detail, write_id)
                VALUES (NEW.id, NEW.user_id, NEW.project_id, 'updated', src, NEW.content,
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
        -- A deletion: the memory's text goes from its history and from the outbox; the tombstone
        -- says when, at whose request and by which write, not what.
        UPDATE memory_events
        SET content = NULL,
            detail = CASE WHEN detail ? 'previous'
                          THEN jsonb_set(detail, '{previous}', (detail -> 'previous') - 'content' - 'metadata')
                          ELSE detail END
        WHERE user_id = OLD.user_id AND memory_id = OLD.id
          AND (content IS NOT NULL OR detail -> 'previous' ?| ARRAY['content', 'metadata']);
        UPDATE change_outbox SET content = NULL
        WHERE user_id = OLD.user_id AND memory_id = OLD.id AND content IS NOT NULL;
        INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, write_id)
        VALUES (OLD.id, OLD.user_id, OLD.project_id, 'deleted', src, NULL, wid);
        RETURN OLD;
    END IF;
END;
$$;

-- The outbox (0009): a forgotten memory's event carries no text, and every event names the write
-- behind it (detail.write_id) when there is one.
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

-- 4. Consolidation's checkpoint: the last user a run finished ('' : start from the first).
INSERT INTO agent_memory_meta (key, value) VALUES ('consolidate_after', '') ON CONFLICT (key) DO NOTHING;
