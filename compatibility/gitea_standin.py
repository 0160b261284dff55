"""A stand-in for the parts of Gitea that OpenEnv's git_env uses, on 127.0.0.1 (or `--host`).

git_env (through OpenEnv's `GitServerClient`) asks a Gitea server for three things:
`GET /` to see it is up, `GET /api/v1/user/repos` to list repositories, and
`git clone <url>/<user>/<repo>.git` (git's smart HTTP). Debian has no Gitea, so this
serves the first two itself and the clones with `git http-backend` (git's own CGI
program) over the bare repositories in `--root`. It takes any credentials.

    python compatibility/gitea_standin.py --root DIR --port 3000 --user openenv
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit


def make_repo(root: Path, name: str, files: dict[str, str]) -> Path:
    """A bare repository `root/<name>.git` with one commit of `files` on `main`,
    made without reading or writing anyone's git config."""
    bare = root / f"{name}.git"
    if bare.exists():
        return bare
    work = root / f".{name}-work"
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "openenv",
        "GIT_AUTHOR_EMAIL": "openenv@local.env",
        "GIT_COMMITTER_NAME": "openenv",
        "GIT_COMMITTER_EMAIL": "openenv@local.env",
    }
    work.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        (work / path).write_text(text)
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "commit", "-q", "-m", "Initial commit"],
        ["git", "clone", "-q", "--bare", str(work), str(bare)],
    ):
        subprocess.run(cmd, cwd=work, env=env, check=True)
    return bare


class Handler(BaseHTTPRequestHandler):
    root: Path
    user: str

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path in ("", "/"):
            self._send(200, b"gitea stand-in")
        elif path == "/api/v1/user/repos":
            base = f"http://{self.headers.get('Host')}"
            repos = [
                {
                    "name": repo.name.removesuffix(".git"),
                    "full_name": f"{self.user}/{repo.name.removesuffix('.git')}",
                    "clone_url": f"{base}/{self.user}/{repo.name}",
                    "description": "",
                }
                for repo in sorted(self.root.glob("*.git"))
            ]
            self._send(200, json.dumps(repos).encode(), "application/json")
        else:
            self._git()

    def do_POST(self) -> None:
        self._git()

    def _git(self) -> None:
        """Git's smart HTTP for `/<user>/<repo>.git/...`, through `git http-backend`."""
        parts = urlsplit(self.path)
        prefix = f"/{self.user}/"
        if not parts.path.startswith(prefix):
            self._send(404, b"not found")
            return
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "REQUEST_METHOD": self.command,
            "PATH_INFO": "/" + parts.path[len(prefix) :],
            "QUERY_STRING": parts.query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "REMOTE_ADDR": "127.0.0.1",
        }
        for header in ("Content-Encoding", "Git-Protocol"):
            if value := self.headers.get(header):
                env["HTTP_" + header.upper().replace("-", "_")] = value
        done = subprocess.run(
            ["git", "http-backend"], input=body, env=env, capture_output=True
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = done.stdout.partition(b"\n\n")
        status, headers = 200, []
        for line in head.decode(errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name.strip(), value.strip()))
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (a container network's gateway for git_env in "
        "Docker; never a public one)",
    )
    parser.add_argument("--user", default="openenv")
    args = parser.parse_args(argv)
    args.root.mkdir(parents=True, exist_ok=True)
    make_repo(
        args.root,
        "hello-world",
        {
            "README.md": "# hello-world\n\nA repository served by the stand-in.\n",
            "hello.py": 'print("hello, world")\n',
        },
    )
    Handler.root, Handler.user = args.root.resolve(), args.user
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(
        f"gitea stand-in on http://{args.host}:{args.port}", file=sys.stderr, flush=True
    )
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
