"""Transports that carry the host contract to runtimes that are not Python.

Config: none of its own (``memtier serve``, ``memtier mcp`` and ``memtier ui`` flags).

Modules by purpose:

* :mod:`.http`: ``memtier serve``'s loopback HTTP server (``/v1/<hook>``, ``/v1/<tool>``,
  ``/health``) the OpenClaw plugin talks to: the protocol, its connections and their limits;
* :mod:`.sidecar`: what the sidecar answers, transport-free (a request in, one Host call, its JSON out);
* :mod:`.serving`: running it for one workspace (lock, token, endpoint file, idle exit, clean shutdown);
* :mod:`.stopping`: the main thread's wait for a server's stop, SIGTERM/SIGINT setting only a flag;
* :mod:`.sidecar_token` holds the sidecar's shared secret (its private folder, the token file) and
  the challenge proof a client checks before it sends the token;
* :mod:`.request_parsing`: untrusted request bodies (the sidecar's and the ui's) read into JSON
  and the hook context and events, a bad field refused as a one-line :class:`.request_parsing.RequestError`;
* :mod:`.mcp`: ``memtier mcp``, the MCP server (stdio) with the memory tools;
* :mod:`.ui`: ``memtier ui``, the local web page's server and its guards (token, Host, Origin);
* :mod:`.ui_views`: what the page shows, read from the workspace without a lock.

Entry points: :func:`.serving.serve`, :func:`.mcp.run_stdio`, :func:`.ui.serve`.
"""
