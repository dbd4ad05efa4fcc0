-- Writes that wait for review (AGENT_MEMORY_REVIEW_WRITES): a flagged write (instructions for the
-- model, personal data, or an untrusted source) is kept here, not in user_memories, so no recall
-- statement (any leg, any user shape, any clock) can ever read it. Approving it writes it as a
-- memory (the ordinary write: same-fact rules, supersedes) and deletes it here; rejecting it
-- deletes it here. Each step is in the memory's history ('pending', 'approved', 'rejected', under
-- the pending id; 'approved' names the memory it became) and in the change events.

CREATE TABLE IF NOT EXISTS pending_memories (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    user_id      text        NOT NULL,
    project_id   text,
    content      text        NOT NULL,
    content_hash bytea       NOT NULL,
    category     text        NOT NULL,
    source       text,
    reasons      text[]      NOT NULL,              -- why it waits: injection:<mark>, pii:<type>, untrusted_source
    memory       jsonb       NOT NULL,              -- the fact as it will be written (NewMemory)
    write_id     uuid,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp()  -- a write's facts in their order
);

-- The same fact flagged twice (a redelivered message, a retried POST) waits once.
CREATE UNIQUE INDEX IF NOT EXISTS pending_memories_fact_idx
    ON pending_memories (user_id, coalesce(project_id, ''), content_hash);

GRANT SELECT, INSERT, UPDATE, DELETE ON pending_memories TO agent_memory_app, agent_memory_maintenance;
ALTER TABLE pending_memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE pending_memories FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS pending_memories_tenant ON pending_memories;
CREATE POLICY pending_memories_tenant ON pending_memories
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS pending_memories_maintenance ON pending_memories;
CREATE POLICY pending_memories_maintenance ON pending_memories TO agent_memory_maintenance
    USING (true) WITH CHECK (true);

-- NOT VALID: every existing row already meets the wider check; no scan of the history.
ALTER TABLE memory_events DROP CONSTRAINT IF EXISTS memory_events_event_check;
ALTER TABLE memory_events ADD CONSTRAINT memory_events_event_check
    CHECK (event IN ('created', 'refreshed', 'superseded', 'merged', 'revived', 'expiry_changed', 'updated',
                     'deleted', 'expired', 'purged', 'pending', 'approved', 'rejected')) NOT VALID;

-- The history and the change events of a pending write. The decision is the transaction's change
-- reason ('approved' or 'rejected'); an approval's memory is agent_memory.approved_as. A rejected
-- write's text leaves its history, as a deleted memory's does (0012).
-- The trigger and its function: functions.sql.
