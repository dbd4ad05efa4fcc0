-- Memories that look like they carry instructions for the model ("ignore previous instructions",
-- "system: ...", a fake [/RUSH_MEMORY], chat-template tokens): why, as reason codes
-- (agent_memory.poison.REASONS), set when the memory is written. Empty: nothing found. Rows
-- written before this migration stay empty until restated; the prompt block defuses their
-- instructions anyway (it runs the same detection on every line it writes).
ALTER TABLE user_memories ADD COLUMN IF NOT EXISTS injection text[] NOT NULL DEFAULT '{}';

-- For a review of the marked memories (rare): only those rows are indexed.
CREATE INDEX IF NOT EXISTS user_memories_injection_idx
    ON user_memories (user_id) WHERE injection <> '{}';
