"""The HTTP API's routes: a Powertools ``Router`` per resource, which RecallFunction's handler
(functions/recall/app.py) includes in its resolver.

A route parses the request (pydantic, through the resolver's validation), works out whose memories it
may touch (:mod:`rushmem.http.identity`), calls one :class:`~rushmem.service.Memory` method
and shapes the answer; errors become HTTP in :mod:`rushmem.http.errors`. Nothing is built at
import time: the service is imported and built on the first request (:mod:`rushmem.lifecycle`),
the MCP SDK on the first ``/mcp`` request.
"""
