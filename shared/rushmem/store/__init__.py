"""The store: every SQL statement of the service, and the only importer of psycopg and pgvector.

A folder per concern: reaching the database and its transactions (:mod:`.engine`), the memories
table (:mod:`.memories`: scope and filters, the recall query, writes and their receipts, edits,
listing and purge, consolidation), dense users' indexes (:mod:`.indexes`), the change outbox
(:mod:`.events`), usage and erasures (:mod:`.accounts`), and the schema (:mod:`.schema`, with
``migrations/``; roles, setup and re-embedding). The records the store shares with the steps are
:mod:`rushmem.records`. The service runs the transactions; nothing here decides what to write.
"""
