"""The HTTP API's shared parts: request/response schemas, caller identity, and errors as HTTP."""
