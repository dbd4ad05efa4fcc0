"""The ``user_memories`` table: whose rows a statement sees, recall's candidates, the writes (one ingest
message's, with its receipt; upserts and supersession; restores), reading and editing one memory,
listing, history and purge, and consolidation's merges."""
