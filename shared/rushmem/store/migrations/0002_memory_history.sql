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

-- The trigger recording them, and its function: functions.sql.
