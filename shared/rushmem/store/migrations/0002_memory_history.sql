-- History of every change to a memory: created, refreshed, superseded, revived, expiry
-- changes, deleted, expired, purged. Recorded by a trigger, so no write path can forget it.
-- The writer may name the change's source and reason for the current transaction with
-- set_config('agent_memory.change_source' / 'agent_memory.change_reason', ..., true).
CREATE TABLE IF NOT EXISTS memory_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id   uuid        NOT NULL,  -- no foreign key: the history outlives a deleted memory
    user_id     text        NOT NULL,
    project_id  text,
    event       text        NOT NULL CHECK (event IN ('created', 'refreshed', 'superseded', 'revived',
                                                      'expiry_changed', 'deleted', 'expired', 'purged')),
    at          timestamptz NOT NULL DEFAULT now(),
    source      text,
    content     text        NOT NULL,
    related_id  uuid,                  -- superseded: the memory that replaced this one
    detail      jsonb       NOT NULL DEFAULT '{}'::jsonb
);

CREATE INDEX IF NOT EXISTS memory_events_user_memory_idx ON memory_events (user_id, memory_id, at, id);

CREATE OR REPLACE FUNCTION agent_memory_record_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    reason text := nullif(current_setting('agent_memory.change_reason', true), '');
    src    text := nullif(current_setting('agent_memory.change_source', true), '');
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, detail)
        VALUES (NEW.id, NEW.user_id, NEW.project_id, 'created', coalesce(src, NEW.source), NEW.content,
                jsonb_build_object('created_at', NEW.created_at));
        RETURN NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        IF OLD.superseded_at IS NULL AND NEW.superseded_at IS NOT NULL THEN
            INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, related_id)
            VALUES (NEW.id, NEW.user_id, NEW.project_id, 'superseded', src, NEW.content, NEW.superseded_by);
        ELSIF OLD.superseded_at IS NOT NULL AND NEW.superseded_at IS NULL THEN
            INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content)
            VALUES (NEW.id, NEW.user_id, NEW.project_id, 'revived', src, NEW.content);
        ELSIF NEW.updated_at > OLD.updated_at THEN
            INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, detail)
            VALUES (NEW.id, NEW.user_id, NEW.project_id, 'refreshed', src, NEW.content,
                    jsonb_build_object('updated_at', NEW.updated_at));
        END IF;
        IF NEW.expires_at IS DISTINCT FROM OLD.expires_at THEN
            INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content, detail)
            VALUES (NEW.id, NEW.user_id, NEW.project_id, 'expiry_changed', src, NEW.content,
                    jsonb_build_object('expires_at', NEW.expires_at));
        END IF;
        RETURN NEW;
    ELSE
        -- Forgetting a user removes their history as well: nothing to record.
        IF reason = 'forget_user' THEN
            RETURN OLD;
        END IF;
        INSERT INTO memory_events (memory_id, user_id, project_id, event, source, content)
        VALUES (OLD.id, OLD.user_id, OLD.project_id,
                CASE WHEN reason IN ('expired', 'purged') THEN reason ELSE 'deleted' END, src, OLD.content);
        RETURN OLD;
    END IF;
END;
$$;

DROP TRIGGER IF EXISTS user_memories_history ON user_memories;
CREATE TRIGGER user_memories_history
    AFTER INSERT OR UPDATE OR DELETE ON user_memories
    FOR EACH ROW EXECUTE FUNCTION agent_memory_record_event();
