"""The read path, step by step: the plan built once from the settings (:mod:`.plan`), candidates
from SQL (:mod:`.candidates`), their order (:mod:`.ranking`, with the maths in :mod:`.scoring` and
the dates a query names in :mod:`.dates`), and the ``[RUSH_MEMORY]`` block for the system prompt
(:mod:`.block`)."""
