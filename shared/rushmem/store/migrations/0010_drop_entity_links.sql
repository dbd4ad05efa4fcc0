-- Entity links (0007) go: no recall step reads them. On the LoCoMo development split the entity
-- leg and the hop through shared entities measured +0.000 recall@10 (most links were the
-- speakers' names), while every write paid for extracting and inserting them. The memories
-- themselves are untouched; a store migrated from scratch creates the table in 0007 and drops
-- it here.
DROP TABLE IF EXISTS memory_entities;

-- The backfill's position (`link-entities`, which is gone with the table).
DELETE FROM agent_memory_meta WHERE key = 'entity_links_after';
