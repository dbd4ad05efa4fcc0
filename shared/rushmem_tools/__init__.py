"""What Lambda never runs: the ``rushmem`` command, the local host (``invoke``, ``serve``,
``demo``), the benchmarks and the cost calculator. Not in the Lambda layer."""
