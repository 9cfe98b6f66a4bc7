"""Transports that carry the host contract to runtimes that are not Python.

Config: none of its own (``memtier serve``, ``memtier mcp`` and ``memtier ui`` flags).

Modules by purpose:

* :mod:`.http`: ``memtier serve``, the loopback HTTP server (``/v1/<hook>``, ``/v1/<tool>``,
  ``/health``) the OpenClaw plugin talks to, with its token and endpoint files;
* :mod:`.mcp`: ``memtier mcp``, the MCP server (stdio) with the memory tools;
* :mod:`.ui`: ``memtier ui``, the local web page's server and its guards (token, Host, Origin);
* :mod:`.ui_views`: what the page shows, read from the workspace without a lock.

Entry points: :func:`.http.serve`, :func:`.mcp.run_stdio`, :func:`.ui.serve`.
"""
