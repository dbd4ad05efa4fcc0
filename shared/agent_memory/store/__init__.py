"""The store: every SQL statement of the service, and the only importer of psycopg and pgvector.

A module per table or concern: where the database is and staying connected (:mod:`.connection`,
:mod:`.embedded`, :mod:`.readers`), whose rows a statement sees (:mod:`.scope`, :mod:`.filters`),
transactions and pipelining (:mod:`.transactions`), the recall query (:mod:`.recall`), writes and
their receipts (:mod:`.writes`), one memory read and edited (:mod:`.edits`), listing, history and
purge (:mod:`.memories`), erasures (:mod:`.erasures`), usage (:mod:`.usage`,
:mod:`.usage_reports`), the change outbox (:mod:`.outbox`), entities (:mod:`.entities`,
:mod:`.entity_links`), dense users' indexes (:mod:`.dense`, :mod:`.indexes`), the schema
(:mod:`.migrate`, ``migrations/``, :mod:`.roles`, :mod:`.setup`) and re-embedding (:mod:`.reembed`).
The service runs the transactions; nothing here decides what to write.
"""
