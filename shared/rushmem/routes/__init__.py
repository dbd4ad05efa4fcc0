"""The HTTP API's Powertools routers, which RecallFunction's handler (functions/recall/app.py)
includes: every operation of the contract's table (:mod:`.operations`), the OpenAPI document, the
memory page, the OAuth metadata and ``/mcp``. Nothing is built at import time: the service loads on
the first request (:mod:`rushmem.lifecycle`), the MCP SDK on the first ``/mcp`` request.
"""
