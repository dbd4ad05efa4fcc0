"""The write path: memories into rows (:mod:`.rows`), the SQL that writes them (:mod:`.writes`),
the "conversation ended" flow (:mod:`.conversation`) and bulk imports (:mod:`.importing`)."""
