"""What an env server's process may see: the one place that decides it.

Code inside an env server is the adversary's (coding envs run the model's code), and
a UV-launched server runs as the eval's own user. So:

- its environment is built, not inherited (`server_environ`): only what uv and
  Python need (`_EXACT`, `LC_*`, `UV_*` but credentials), the index's certificates
  and proxies, the test run's markers, a `HOME` of its own per eval (`server_home`,
  with the user's uv cache, Pythons and `uv.toml`), what the launcher sets, then
  `provider_kwargs.env_vars` and the `forward_env` values. Never `VF_*`, `MCP_*`, the
  lease endpoint, API keys or any other variable of the eval;
- our processes that hold secrets (the eval, the user simulators and their fork
  server, the tool server) make themselves non-dumpable (`hide_this_process`): no
  other process of the user reads their `/proc/<pid>/environ` or memory, nor
  ptraces them. Root (`CAP_SYS_PTRACE`) still can (docs/security.md).

A Docker container sees only what its launch passes it by name.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Mapping

HOME_VAR = "OPENENV_V1_SERVER_HOME"
"""Set by `use_server_home`; processes started after inherit the servers' HOME."""
DEBUGGABLE_VAR = "OPENENV_V1_DEBUGGABLE"
"""`1`: `hide_this_process` does nothing (a debugger can attach; so can env code)."""

_EXACT = frozenset(
    {
        "PATH",
        "TMPDIR",
        "USER",
        "LOGNAME",
        "TZ",
        "LANG",
        "LANGUAGE",
        "PYTHONUNBUFFERED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYENV_ROOT",
        "PYENV_VERSION",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        # Which test run launched it: markers, never secrets.
        "OPENENV_V1_TEST_RUN",
        "PYTEST_XDIST_WORKER",
        *(
            name
            for base in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")
            for name in (base, base.lower())
        ),
    }
)
_PASSED = re.compile(r"LC_[A-Z_]+|UV_[A-Z0-9_]+")
_CREDENTIAL = re.compile(r"UV_PUBLISH_.*|.*_(PASSWORD|TOKEN)")
_CREDENTIAL_LIKE = re.compile(r"API_?KEY|TOKEN|SECRET|PASSWORD")
_SET_BY_LAUNCHER = frozenset({"UV_PROJECT_ENVIRONMENT", "UV_PROJECT"})

_home: str | None = None  # this process's own per-eval HOME, once made


def passed_names(environ: Mapping[str, str]) -> list[str]:
    """The names of `environ` an env server inherits (see the module docstring)."""
    return sorted(
        name
        for name in environ
        if (name in _EXACT or _PASSED.fullmatch(name))
        and not _CREDENTIAL.fullmatch(name)
        and name not in _SET_BY_LAUNCHER
    )


def without_credentials(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the variables named like credentials (`API_KEY`, `TOKEN`,
    `SECRET`, `PASSWORD`), for our processes that need none of the eval's keys."""
    return {k: v for k, v in environ.items() if not _CREDENTIAL_LIKE.search(k.upper())}


def server_environ(env_vars: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a UV-launched env server, `env_vars` on top."""
    env = {name: os.environ[name] for name in passed_names(os.environ)}
    env["UV_CACHE_DIR"] = user_uv_cache_dir()
    env["UV_PYTHON_INSTALL_DIR"] = user_uv_python_dir()
    env["HOME"] = server_home()
    env.update(env_vars or {})
    return env


def user_home() -> str:
    return os.path.expanduser("~")


def user_uv_cache_dir() -> str:
    """uv's cache as uv finds it for this process's user (`uv cache dir`)."""
    return os.environ.get("UV_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(user_home(), ".cache"), "uv"
    )


def user_uv_python_dir() -> str:
    """Where uv keeps the Pythons it installs for this user (`uv python dir`)."""
    return os.environ.get("UV_PYTHON_INSTALL_DIR") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.join(user_home(), ".local", "share"),
        "uv",
        "python",
    )


def use_server_home(setting: str | None) -> str:
    """Settle the HOME of the env servers this process and its children launch:
    `setting` (a path), else a folder of their own for this eval; returns it."""
    if setting:
        home = os.path.abspath(os.path.expanduser(setting))
        os.makedirs(home, exist_ok=True)
    else:
        home = os.environ.get(HOME_VAR) or _own_home()
    os.environ[HOME_VAR] = home
    return home


def server_home() -> str:
    """The env servers' HOME: the one `use_server_home` settled, else a new one."""
    home = os.environ.get(HOME_VAR)
    if home and os.path.isdir(home):
        return home
    return _own_home()


def _own_home() -> str:
    """A new 0700 folder per process, removed at exit, with the user's `uv.toml`."""
    global _home
    if _home is None or not os.path.isdir(_home):
        _home = tempfile.mkdtemp(prefix="openenv-v1-home-")
        atexit.register(shutil.rmtree, _home, ignore_errors=True)
        config = os.path.join(
            os.environ.get("XDG_CONFIG_HOME") or os.path.join(user_home(), ".config"),
            "uv",
            "uv.toml",
        )
        if os.path.isfile(config):
            target = os.path.join(_home, ".config", "uv")
            os.makedirs(target)
            with contextlib.suppress(OSError):
                shutil.copyfile(config, os.path.join(target, "uv.toml"))
    return _home


def hide_this_process() -> bool:
    """Make this process (and its forks, not what it executes) non-dumpable; whether
    it took (Linux only; skipped with `OPENENV_V1_DEBUGGABLE=1`)."""
    if os.environ.get(DEBUGGABLE_VAR, "").strip() == "1":
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0) == 0
    except (OSError, AttributeError):
        return False


_PR_SET_DUMPABLE = 4
