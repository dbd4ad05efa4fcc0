"""The read path, step by step: the plan built once from the settings (:mod:`.plan`), candidates
from SQL (:mod:`rushmem.store.memories.recall`), their order (:mod:`.ranking`, with the maths in
:mod:`.scoring` and the dates a query names in :mod:`.dates`), the ``[RUSH_MEMORY]`` block for the
system prompt (:mod:`.block`), and on request why (:mod:`.explain`)."""
