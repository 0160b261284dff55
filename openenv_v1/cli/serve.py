"""Serve an ASGI app on a socket this process binds, and say which port it got.

    python -m openenv_v1.cli.serve wordle_env.server.app:app --port 0 --port-file F

The port is bound before the app is imported (a taken port fails at once) and
written to `--port-file`, so the caller polls its own server, not another one
listening there. The app is imported with gradio hidden (it triples an OpenEnv
app's start-up), as the UV launcher serves an env.
"""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

from openenv_v1.core.light_import import without_gradio


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("app", help="ASGI app, `module:attribute`")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", required=True, help="the bound port goes here")
    args = parser.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    Path(args.port_file).write_text(str(sock.getsockname()[1]))
    config = uvicorn.Config(args.app, log_level="warning")
    with without_gradio():
        config.load()  # imports the app; the server does not load it again
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
