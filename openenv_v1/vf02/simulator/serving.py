"""How a user simulator's MCP server answers each turn without waiting or idle work.

verifiers 0.2 serves the simulator with uvicorn on a socket it binds itself
(`ServerBase._serve`: `socket.socket(AF_INET, SOCK_STREAM)`, protocol 0). asyncio
turns Nagle's algorithm off only on TCP sockets whose protocol is `IPPROTO_TCP`
(`asyncio.base_events._set_nodelay`), so every connection that socket accepts kept
Nagle on. uvicorn writes a response's headers and its body in two sends; with Nagle
the body waits for the client's ACK of the headers, and the client (verifiers'
eval, on Linux) delays that ACK up to 40 ms. verifiers opens a fresh MCP session per
turn (initialize, the `respond` call, a `tools/list` the MCP client makes to
validate the result), so most turns paid that 40 ms once, on a turn of a few ms.

`no_delay_listeners()` sets `TCP_NODELAY` on the process's bound, unconnected TCP
sockets (its listeners) before the server serves; Linux copies the option to every
connection a listener accepts.

It also has them listen at once. verifiers binds the socket and reports its port
before the simulator's setup (`setup_task`: the lease, the env session, the reset)
and listens only once that is done; meanwhile its readiness probe (a `python3`
that GETs `/mcp`, its own timeout 2 s) is refused and sleeps a whole second before
each retry, so a simulator ready just after a refusal waited up to a second more,
half a second a rollout on average. Listening, the probe's request waits in the
backlog and is answered as soon as the server serves.

The server is mcp's FastMCP in stateless mode, which builds a session per request
(four a turn: initialize, its notification, the `respond` call, `tools/list`), and
for each it also:

- logs two INFO lines (`Processing request of type ...`, `Terminating session:
  None`) through the rich handler FastMCP's `logging.basicConfig` installs, into the
  simulator's log file: about 8 ms of the simulator's CPU a turn.
  `quiet_request_logs()` raises mcp's loggers to WARNING (its warnings and errors
  still go there);
- reads mcp's version from its installed metadata (`importlib.metadata`, a scan of
  site-packages) for the initialization options, unless the server has a version:
  about 0.5 ms each. `pin_version(server)` gives it that same version, read once;
- validates the `respond` tool's result against the output schema FastMCP derived
  from its `-> str` (`{"result": string}`), and so does the eval's MCP client, which
  lists the tools (the fourth request) to learn it: jsonschema checks the schema
  itself each time. verifiers reads only the text content.
  `unstructured(server, "respond")` registers the same function without an output
  schema, and both checks are skipped (the `tools/list` stays: the client makes it
  for any tool it has not listed).

    no_delay_listeners()    # OpenEnvUser.setup, before uvicorn serves
    quiet_request_logs()
    pin_version(mcp)      # OpenEnvUser._register, once FastMCP is built
    unstructured(mcp, "respond")
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcp.server.fastmcp import FastMCP

__all__ = ["no_delay_listeners", "pin_version", "quiet_request_logs", "unstructured"]

_FDS = "/proc/self/fd"
LISTEN_BACKLOG = 2048
"""uvicorn's own backlog, which it sets again as it serves."""


def no_delay_listeners() -> int:
    """Turn Nagle off on this process's TCP listeners (bound, not connected), so
    their accepted connections start without it, and have them listen now (the
    module docstring says why); returns how many. A no-op (0) where the process's
    descriptors cannot be listed (not Linux)."""
    try:
        fds = [int(name) for name in os.listdir(_FDS)]
    except OSError:
        return 0
    count = 0
    for fd in fds:
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue  # not a socket, or closed meanwhile
        with sock:
            if _is_tcp_listener(sock):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                    with contextlib.suppress(OSError):  # e.g. a client connecting
                        sock.listen(LISTEN_BACKLOG)
                count += 1
    return count


def _is_tcp_listener(sock: socket.socket) -> bool:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    if sock.type != socket.SOCK_STREAM:
        return False
    with contextlib.suppress(OSError):
        sock.getpeername()
        return False  # a connection (the env client's, the state channel's)
    with contextlib.suppress(OSError):
        return sock.getsockname()[1] != 0
    return False


def quiet_request_logs() -> None:
    """mcp's per-request INFO lines off in this process: its loggers log WARNING and
    above."""
    logging.getLogger("mcp").setLevel(logging.WARNING)


def pin_version(server: FastMCP) -> None:
    """Give `server` mcp's installed version (the one it reports when it has none),
    read once per process, so no request reads the package metadata again."""
    low_level = server._mcp_server
    if not low_level.version:
        low_level.version = _mcp_version()


@functools.cache
def _mcp_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mcp")
    except PackageNotFoundError:
        return "unknown"


def unstructured(server: FastMCP, name: str) -> None:
    """Register the tool `name` of `server` again, the same function under the same
    name and description, without an output schema (its result is its text
    content only)."""
    tool = server._tool_manager.get_tool(name)
    if tool is None or tool.output_schema is None:
        return
    server.remove_tool(name)
    server.add_tool(
        tool.fn,
        name=tool.name,
        title=tool.title,
        description=tool.description,
        annotations=tool.annotations,
        icons=tool.icons,
        meta=tool.meta,
        structured_output=False,
    )
