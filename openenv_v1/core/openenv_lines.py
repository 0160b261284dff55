"""The parts of OpenEnv's client package that differ between its two lines.

verifiers 0.2 installs `openenv` 0.10; verifiers 0.4 needs `openenv-core` 0.3.0. Both
are wire-compatible, but 0.3.0 lacks what 0.10 added (the `git+` clone,
`GIT_URL_PREFIX`, `hf_space_subdomain`, the client's `base_url`): those are taken from
OpenEnv when it has them and defined here the same way otherwise. Nothing else in the
core looks at which line is installed.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
import tempfile
from typing import Any
from urllib.parse import urlsplit

from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from openenv_v1.core.light_import import without_gradio

with without_gradio():
    from openenv import GenericEnvClient as _GenericEnvClient
    from openenv.core import utils as _utils
    from openenv.core.containers.runtime import uv_provider as _uv
    from openenv.core.containers.runtime.providers import RuntimeProvider

UVProvider = _uv.UVProvider
find_free_port = _uv._find_free_port
check_uv_installed = _uv._check_uv_installed
"""`RuntimeError` naming the fix when `uv` is not on PATH (both lines)."""

GIT_URL_PREFIX: str = getattr(_uv, "GIT_URL_PREFIX", "git+")
"""How a `project_path` names a git repository to clone (`git+https://...`)."""


def _clone_git_project(git_url: str, timeout_s: float) -> str:
    """Clone `git+<url>` (shallow) to a fresh temp dir and return its path; a
    `RuntimeError` names what failed. As openenv 0.10's own, but the URL follows
    `--`: one that starts with `-` (`git+--upload-pack=<command>`) is a repository
    name, never an option that runs a command."""
    repo_url = git_url[len(GIT_URL_PREFIX) :]
    clone_dir = tempfile.mkdtemp(prefix="openenv-uv-clone-")
    try:
        subprocess.run(
            ["git", "clone", "--depth", "1", "--", repo_url, clone_dir],
            check=True,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except FileNotFoundError as exc:
        shutil.rmtree(clone_dir, ignore_errors=True)
        raise RuntimeError(
            f"`git` executable not found; required to clone project_path {git_url!r}."
        ) from exc
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(clone_dir, ignore_errors=True)
        raise RuntimeError(f"Failed to clone {repo_url!r}: {exc.stderr}") from exc
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(clone_dir, ignore_errors=True)
        raise RuntimeError(
            f"Timed out cloning {repo_url!r} after {timeout_s:.1f}s"
        ) from exc
    return clone_dir


def _hf_space_subdomain(repo_id: str) -> str:
    """A Space id's subdomain and registry name: lowercased, every character outside
    `[a-z0-9]` a `-` (`openenv/echo_env` -> `openenv-echo-env`)."""
    return re.sub(r"[^a-z0-9]", "-", repo_id.lower())


clone_git_project = _clone_git_project
hf_space_subdomain = getattr(_utils, "hf_space_subdomain", _hf_space_subdomain)


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname
    if host is None:
        return False
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


if hasattr(_GenericEnvClient, "base_url"):
    GenericEnvClient = _GenericEnvClient
else:

    class GenericEnvClient(_GenericEnvClient):  # type: ignore[no-redef]
        """openenv-core 0.3.0's client, with 0.10's public `base_url`, its step
        results' `metadata` (sent by 0.10 servers, else None), its reading of a
        refused session's error (e.g. `CAPACITY_REACHED`), and its connect."""

        def __init__(self, base_url: str, **kwargs: Any) -> None:
            super().__init__(base_url=base_url, **kwargs)
            self._base_url = base_url.rstrip("/")

        @property
        def base_url(self) -> str:
            """The server's URL as given (`http://` or `ws://`), no trailing /."""
            return self._base_url

        async def connect(self) -> Any:
            """As 0.10 connects: a loopback server with no proxy, asked per
            connection. 0.3.0 sets the process's `NO_PROXY` around each connect
            and restores it after, which concurrent connects race on (and each
            looks the proxies up in the environment again)."""
            if self._ws is not None:
                return self
            local = {"proxy": None} if _is_loopback(self._ws_url) else {}
            try:
                self._ws = await ws_connect(
                    self._ws_url,
                    open_timeout=self._connect_timeout,
                    max_size=self._max_message_size,
                    **local,
                )
            except Exception as e:
                raise ConnectionError(
                    f"Failed to connect to {self._ws_url}: {e}"
                ) from e
            return self

        async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
            try:
                await self._send(message)
            except ConnectionClosed:
                # A refused session sends an error frame, then closes: if the close
                # beats our send, read the queued frame (recv() re-raises if none).
                pass
            response = await self._receive()
            if response.get("type") == "error":
                error = response.get("data", {})
                raise RuntimeError(
                    f"Server error: {error.get('message', 'Unknown error')} "
                    f"(code: {error.get('code', 'UNKNOWN')})"
                )
            return response

        def _parse_result(self, payload: dict[str, Any]) -> Any:
            result = super()._parse_result(payload)
            result.metadata = payload.get("metadata")
            return result


__all__ = [
    "GIT_URL_PREFIX",
    "RuntimeProvider",
    "UVProvider",
    "check_uv_installed",
    "clone_git_project",
    "find_free_port",
    "GenericEnvClient",
    "hf_space_subdomain",
]
