"""The read path, step by step: candidates from SQL (:mod:`.candidates`), their order
(:mod:`.ranking`, with the maths in :mod:`.scoring` and the dates a query names in :mod:`.dates`),
and the ``[RUSH_MEMORY]`` block for the system prompt (:mod:`.block`)."""
