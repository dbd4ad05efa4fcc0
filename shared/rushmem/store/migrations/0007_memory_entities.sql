-- Entity links: which named things (people, places, products, projects, titles) each memory
-- names, by a normalised key (see agent_memory.extraction.entities). Recall uses them as a
-- candidate leg (memories naming what the question names) and for one hop from its best
-- candidates. Written with the memory, in the same transaction; gone with it (ON DELETE CASCADE).
-- No graph database: a link table, scoped and walled like the memories themselves.
CREATE TABLE IF NOT EXISTS memory_entities (
    user_id    text NOT NULL,
    entity_key text NOT NULL CHECK (entity_key <> '' AND length(entity_key) <= 200),
    memory_id  uuid NOT NULL REFERENCES user_memories (id) ON DELETE CASCADE,
    PRIMARY KEY (user_id, entity_key, memory_id)
);

-- From a memory to its entities (the hop from the best candidates, the cascade on delete).
CREATE INDEX IF NOT EXISTS memory_entities_memory_idx ON memory_entities (memory_id);

-- The same walls as user_memories (0003): the functions see one user's links at a time.
GRANT SELECT, INSERT, DELETE ON memory_entities TO agent_memory_app, agent_memory_maintenance;
ALTER TABLE memory_entities ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_entities FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS memory_entities_tenant ON memory_entities;
CREATE POLICY memory_entities_tenant ON memory_entities
    USING (user_id = current_setting('agent_memory.user_id', true))
    WITH CHECK (user_id = current_setting('agent_memory.user_id', true));

DROP POLICY IF EXISTS memory_entities_maintenance ON memory_entities;
CREATE POLICY memory_entities_maintenance ON memory_entities TO agent_memory_maintenance
    USING (true) WITH CHECK (true);

-- Memories stored before this migration have no links (SQL cannot run the Python extractor):
-- `agent-memory link-entities` (and MigrateFunction, within a time budget) walks them in id
-- order and records here where it stopped, so an interrupted run resumes. '' = from the
-- start, 'done' = finished. (Whether there are memories cannot be asked here: row-level
-- security hides every row from the owner, so a new store starts pending and its first run,
-- finding nothing, finishes at once.)
INSERT INTO agent_memory_meta (key, value) VALUES ('entity_links_after', '')
ON CONFLICT (key) DO NOTHING;
