-- One row per "conversation ended" message already written, keyed by a hash of its
-- validated body: a redelivered message (SQS is at-least-once) is recognised before any
-- extraction call and inside the write transaction, so it changes nothing even when an
-- LLM would word the same facts differently the second time. Written in the same
-- transaction as the message's memories: both or neither.
CREATE TABLE IF NOT EXISTS ingested_messages (
    user_id         text        NOT NULL,
    message_hash    bytea       NOT NULL,
    conversation_id text,
    memories        integer     NOT NULL,
    ingested_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, message_hash)
);

-- The same walls as user_memories (0003): the functions see one user's receipts at a time.
GRANT SELECT, INSERT, DELETE ON ingested_messages TO agent_memory_app, agent_memory_maintenance;
ALTER TABLE ingested_messages ENABLE ROW LEVEL SECURITY;
ALTER TABLE ingested_messages FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS ingested_messages_tenant ON ingested_messages;
CREATE POLICY ingested_messages_tenant ON ingested_messages
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS ingested_messages_maintenance ON ingested_messages;
CREATE POLICY ingested_messages_maintenance ON ingested_messages TO agent_memory_maintenance
    USING (true) WITH CHECK (true);
