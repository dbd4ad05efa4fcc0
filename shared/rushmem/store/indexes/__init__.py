"""Dense users' own partitions of ``dense_memories`` and their HNSW and GIN indexes."""
