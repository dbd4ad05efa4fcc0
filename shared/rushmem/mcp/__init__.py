"""The MCP server of rushmem: the memory tools over Streamable HTTP (stateless, JSON answers)
inside RecallFunction under ``/mcp``; over stdio it is ``rushmem mcp`` (the tools' CLI).

- :mod:`.tools`: the tools on the SDK's ``MCPServer``, over the service, with an identity resolver:
  the transport decides whose memories a call touches, never the model.
- :mod:`.http`: one HTTP request (an API Gateway event's method, headers and body) answered by the
  SDK's own Streamable HTTP code, in-process.

Nothing here is imported by the REST routes: the ``mcp`` SDK is loaded on the first MCP request.
"""
