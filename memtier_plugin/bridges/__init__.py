"""Transports that carry the host contract to runtimes that are not Python.

Config: none of its own (``memtier serve`` and ``memtier mcp`` flags).

Modules by purpose:

* :mod:`.http`: ``memtier serve``, the loopback HTTP server (``/v1/<hook>``, ``/v1/<tool>``,
  ``/health``) the OpenClaw plugin talks to, with its token and endpoint files;
* :mod:`.mcp`: ``memtier mcp``, the MCP server (stdio) with the memory tools.

Entry points: :func:`.http.serve`, :func:`.mcp.run_stdio`.
"""
