"""The MCP server of rushmem: the memory tools (:mod:`.tools`) over Streamable HTTP inside
RecallFunction under ``/mcp`` (:mod:`.http`), and over stdio as ``rushmem mcp``. Nothing here is
imported by the REST routes: the ``mcp`` SDK is loaded on the first MCP request.
"""
