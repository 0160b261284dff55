"""The local Wordle app, imported with a thread left running: a pool must not fork
servers from a process holding one (a fork copies only the forking thread)."""

import threading
import time

threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()

from wordle_env.server.app import app  # noqa: E402

__all__ = ["app"]
