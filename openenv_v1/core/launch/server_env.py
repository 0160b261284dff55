"""What an env server's process may see: the one place that decides it.

Code inside an env server is the adversary's (coding envs run the model's code
there), and a UV-launched server runs as the eval's own user. So:

- **Its environment is built, not inherited** (`server_environ`). A UV server, and
  everything it spawns, starts from nothing but:

  - what uv and Python need: `PATH`, `TMPDIR`, `USER`, `LOGNAME`, `TZ`, `LANG`,
    `LANGUAGE`, `LC_*`, `PYTHONUNBUFFERED`, `PYTHONDONTWRITEBYTECODE`,
    `PYTHONIOENCODING`, `PYTHONUTF8`, `PYENV_ROOT`, `PYENV_VERSION` (a `python` found
    through pyenv's shims), every `UV_*` setting except credentials (names ending in
    `_PASSWORD` or `_TOKEN`, and `UV_PUBLISH_*`);
  - `OPENENV_V1_TEST_RUN`, `PYTEST_XDIST_WORKER`: which test run started it (this
    project's suite tells its servers apart by them);
  - what uv needs to reach a package index: `SSL_CERT_FILE`, `SSL_CERT_DIR`,
    `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`, and `HTTP(S)_PROXY`, `ALL_PROXY`,
    `NO_PROXY` (either case);
  - `HOME`: a folder of its own per eval (`server_home`), unless the user names one;
    with it `UV_CACHE_DIR` and `UV_PYTHON_INSTALL_DIR` set to the user's own (a new
    HOME must not make every launch download again), and the user's `uv.toml`
    copied in;
  - set by the launcher: `UV_PROJECT_ENVIRONMENT`, `PYTHONPATH` (the env's folder),
    `VIRTUAL_ENV` (a prepared environment);
  - `provider_kwargs.env_vars` and the values of `forward_env`, on top.

  Nothing else: never `VF_*`, `MCP_*`, the lease endpoint, API keys or any other
  variable of the eval.
- **Our processes that hold secrets cannot be read by it** (`hide_this_process`):
  the eval (API keys, the pool's token), verifiers 0.2's user simulators and their
  fork server (the rollout's state channel secret), the native tool server. Each
  makes itself non-dumpable, so that another process of the same user cannot read
  its `/proc/<pid>/environ`, `mem` or `maps`, nor ptrace it. Processes running
  with `CAP_SYS_PTRACE` (root, by default) still can: never run an eval of
  untrusted code as root with UV servers (docs/security.md).

A Docker container sees only what `docker_launch` passes it by name.
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
"""Set by `use_server_home` in the process that builds the taskset; the processes
it starts (verifiers 0.2's user simulators) inherit it and so launch their servers
with the same HOME."""
DEBUGGABLE_VAR = "OPENENV_V1_DEBUGGABLE"
"""`1`: `hide_this_process` does nothing (a debugger or py-spy can attach, and so
can code in an env server)."""

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
        # Which test run launched it (this project's suite tells the servers of
        # its runs and workers apart by them): markers, never secrets.
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

_home: str | None = None
"""This process's own per-eval HOME folder, once made."""


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
    """`environ` without the variables that look like credentials (names containing
    `API_KEY`, `TOKEN`, `SECRET`, `PASSWORD`): for processes of ours that need the
    eval's settings but none of its keys (verifiers 0.2's simulator fork server)."""
    return {k: v for k, v in environ.items() if not _CREDENTIAL_LIKE.search(k.upper())}


def server_environ(env_vars: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a UV-launched env server: the passed names of this
    process's environment, `HOME` (`server_home()`) with the user's uv cache and
    Pythons, then `env_vars` (`provider_kwargs.env_vars` and the `forward_env`
    values) on top."""
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
    """Settle the HOME of the env servers this process (and the processes it starts)
    launches: `setting` (a path; `~` is the user's own HOME), or unset, a folder of
    their own for this eval (`server_home()`). Returns the folder."""
    if setting:
        home = os.path.abspath(os.path.expanduser(setting))
        os.makedirs(home, exist_ok=True)
    else:
        home = os.environ.get(HOME_VAR) or _own_home()
    os.environ[HOME_VAR] = home
    return home


def server_home() -> str:
    """The env servers' HOME: the one `use_server_home` settled (here or in the
    process that started this one), else this process's own new folder."""
    home = os.environ.get(HOME_VAR)
    if home and os.path.isdir(home):
        return home
    return _own_home()


def _own_home() -> str:
    """A new 0700 folder, once per process, removed at exit; the user's uv settings
    (`uv.toml`) are copied in, so uv behaves as it does for the user."""
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
    """Make this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): other processes
    of the same user can no longer read its environment, memory or maps under
    `/proc`, nor ptrace it. Its forks stay so; a program it executes does not.
    Returns whether it took (Linux only; skipped with `OPENENV_V1_DEBUGGABLE=1`)."""
    if os.environ.get(DEBUGGABLE_VAR, "").strip() == "1":
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0) == 0
    except (OSError, AttributeError):
        return False


_PR_SET_DUMPABLE = 4
