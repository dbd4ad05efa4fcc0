"""The database: where it is and staying connected (:mod:`.connection`, :mod:`.embedded`), whose
memories a statement sees (:mod:`.scope`), and transactions with pipelining (:mod:`.transactions`)."""
