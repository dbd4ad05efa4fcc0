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
