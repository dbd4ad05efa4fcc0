-- What a deployment keeps about its tenants besides their memories: usage per user and day,
-- the outbox of change events, and the receipts of erasures. Each is written in the same
-- transaction as the work it records; each sits behind the same walls as user_memories (0003).

-- ---- Usage: one row per user, UTC day, kind of work and model --------------------------------
-- recall / conversation / write: requests served; embedding / llm / pii: provider calls, with
-- the tokens the provider reported (0 where it reports none) and the characters sent.
CREATE TABLE IF NOT EXISTS usage_daily (
    user_id       text   NOT NULL,
    day           date   NOT NULL,
    kind          text   NOT NULL
                  CHECK (kind IN ('recall', 'conversation', 'write', 'embedding', 'llm', 'pii')),
    model         text   NOT NULL DEFAULT '',
    calls         bigint NOT NULL DEFAULT 0,
    input_tokens  bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    characters    bigint NOT NULL DEFAULT 0,
    items         bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (user_id, day, kind, model)
);

GRANT SELECT, INSERT, UPDATE, DELETE ON usage_daily TO agent_memory_app, agent_memory_maintenance;
ALTER TABLE usage_daily ENABLE ROW LEVEL SECURITY;
ALTER TABLE usage_daily FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS usage_daily_tenant ON usage_daily;
CREATE POLICY usage_daily_tenant ON usage_daily
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS usage_daily_maintenance ON usage_daily;
CREATE POLICY usage_daily_maintenance ON usage_daily TO agent_memory_maintenance
    USING (true) WITH CHECK (true);

-- ---- Change events: an outbox drained to EventBridge after commit ------------------------------
-- A row per change, written by a trigger in the changing transaction when the transaction says
-- set_config('agent_memory.outbox', 'ids' | 'content', true) (the service does when
-- AGENT_MEMORY_EVENT_BUS is set; otherwise nothing is written). Rows are deleted once the bus
-- accepted them; a failed publish leaves them for a later drain (next_attempt_at, backoff).
CREATE TABLE IF NOT EXISTS change_outbox (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id        uuid        NOT NULL DEFAULT gen_random_uuid(),  -- stable across retries: consumers dedupe on it
    user_id         text        NOT NULL,
    event           text        NOT NULL,
    memory_id       uuid,
    project_id      text,
    category        text,
    related_id      uuid,
    source          text,
    content         text,                                            -- only with 'content'
    detail          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    at              timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text
);

CREATE INDEX IF NOT EXISTS change_outbox_due_idx ON change_outbox (next_attempt_at, id);
CREATE INDEX IF NOT EXISTS change_outbox_user_idx ON change_outbox (user_id, id);

GRANT SELECT, INSERT, UPDATE, DELETE ON change_outbox TO agent_memory_app, agent_memory_maintenance;
ALTER TABLE change_outbox ENABLE ROW LEVEL SECURITY;
ALTER TABLE change_outbox FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS change_outbox_tenant ON change_outbox;
CREATE POLICY change_outbox_tenant ON change_outbox
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

-- The scheduled drain publishes every user's events from a request function's login: it says so
-- explicitly (set_config('agent_memory.outbox_drain', 'on', true)); a transaction that names no
-- user and does not say so still sees nothing.
DROP POLICY IF EXISTS change_outbox_drain ON change_outbox;
CREATE POLICY change_outbox_drain ON change_outbox FOR ALL
    USING (current_setting('agent_memory.outbox_drain', true) = 'on')
    WITH CHECK (current_setting('agent_memory.outbox_drain', true) = 'on');

DROP POLICY IF EXISTS change_outbox_maintenance ON change_outbox;
CREATE POLICY change_outbox_maintenance ON change_outbox TO agent_memory_maintenance
    USING (true) WITH CHECK (true);

-- The trigger writing them, and its function: functions.sql.

-- ---- Erasure receipts --------------------------------------------------------------------------
-- What forgetting a user deleted, when, at whose request; the subject only as
-- HMAC-SHA256(erasure_key, user_id) (see agent_memory/store/accounts/erasures.py). Kept after the erasure, never
-- updated or deleted by the functions. Readable by naming the receipt (agent_memory.erasure_id)
-- or its subject (agent_memory.erasure_subject, hex): no transaction lists them all but maintenance.
CREATE TABLE IF NOT EXISTS erasure_receipts (
    id           uuid        PRIMARY KEY,
    subject_hash bytea       NOT NULL,
    requested_by text        NOT NULL,
    erased_at    timestamptz NOT NULL DEFAULT clock_timestamp(),
    deleted      jsonb       NOT NULL
);

CREATE INDEX IF NOT EXISTS erasure_receipts_subject_idx ON erasure_receipts (subject_hash, erased_at);

GRANT SELECT, INSERT ON erasure_receipts TO agent_memory_app, agent_memory_maintenance;
ALTER TABLE erasure_receipts ENABLE ROW LEVEL SECURITY;
ALTER TABLE erasure_receipts FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS erasure_receipts_write ON erasure_receipts;
CREATE POLICY erasure_receipts_write ON erasure_receipts FOR INSERT WITH CHECK (true);

DROP POLICY IF EXISTS erasure_receipts_read ON erasure_receipts;
CREATE POLICY erasure_receipts_read ON erasure_receipts FOR SELECT
    USING (id::text = current_setting('agent_memory.erasure_id', true)
           OR encode(subject_hash, 'hex') = current_setting('agent_memory.erasure_subject', true));

DROP POLICY IF EXISTS erasure_receipts_maintenance ON erasure_receipts;
CREATE POLICY erasure_receipts_maintenance ON erasure_receipts FOR SELECT TO agent_memory_maintenance
    USING (true);

-- The deployment's key for the receipts' subject hash: 256 bits from gen_random_uuid() (a strong
-- random source), generated once; an upgrade keeps an existing key.
INSERT INTO agent_memory_meta (key, value)
VALUES ('erasure_key',
        encode(sha256(convert_to(gen_random_uuid()::text || gen_random_uuid()::text || gen_random_uuid()::text,
                                 'UTF8')), 'hex'))
ON CONFLICT (key) DO NOTHING;
