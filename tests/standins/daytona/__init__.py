"""Stand-in for the `daytona` SDK (not installed here), as OpenEnv's
`DaytonaProvider` uses it: `Daytona(DaytonaConfig(...))`, `.create(params,
timeout=...)`, the sandbox's `process.exec` and `create_signed_preview_url`, and
`.delete(sandbox)`. Put `tests/standins` on `sys.path` (or PYTHONPATH) and the real
provider imports this; its sandboxes are `local_sandbox.LocalSandbox`es, so a rollout
runs against a real local OpenEnv server.

Every call is recorded in `CALLS` and, when `OPENENV_V1_STANDIN_RECORD` names a file,
appended to it as a JSON line (from any process). Environment values are recorded
by name only, and the API key as the variable it came from.

Hooks for tests in this process: `CREATE_GATE` (an Event `create` waits on),
`FAIL_CREATE` (an exception `create` raises after making the sandbox's handle).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from typing import Any

from local_sandbox import LocalSandbox

CALLS: list[list[Any]] = []
SANDBOXES: list[LocalSandbox] = []
CREATE_GATE: threading.Event | None = None
FAIL_EXEC: Exception | None = None
_lock = threading.Lock()


def _record(*entry: Any) -> None:
    with _lock:
        CALLS.append(list(entry))
        path = os.environ.get("OPENENV_V1_STANDIN_RECORD")
        if path:
            with open(path, "a") as f:
                f.write(json.dumps(list(entry), default=str) + "\n")


class DaytonaConfig:
    def __init__(
        self,
        api_key: str | None = None,
        api_url: str | None = None,
        target: str | None = None,
    ) -> None:
        key = None
        if api_key is not None:
            key = (
                "$DAYTONA_API_KEY"
                if api_key == os.environ.get("DAYTONA_API_KEY")
                else "<other>"
            )
        _record("DaytonaConfig", {"api_key": key, "api_url": api_url, "target": target})


class CreateSandboxFromImageParams:
    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs


class CreateSandboxFromSnapshotParams(CreateSandboxFromImageParams):
    pass


class Image:
    @staticmethod
    def from_dockerfile(path: str) -> str:
        return f"dockerfile-image:{path}"


@dataclass
class ExecuteResponse:
    result: str
    exit_code: int = 0


@dataclass
class SignedPreviewUrl:
    url: str
    token: str


class _Process:
    def __init__(self, sandbox: LocalSandbox) -> None:
        self._sandbox = sandbox

    def exec(self, command: str, timeout: int | None = None) -> ExecuteResponse:
        _record("exec", command, timeout)
        if FAIL_EXEC is not None and command.startswith("nohup"):
            raise FAIL_EXEC
        return ExecuteResponse(self._sandbox.exec(command))


class Sandbox:
    def __init__(self, local: LocalSandbox) -> None:
        self.id = f"sandbox-{local.port}"
        self.local = local
        self.process = _Process(local)

    def create_signed_preview_url(
        self, port: int, expires_in_seconds: int | None = None
    ) -> SignedPreviewUrl:
        _record("create_signed_preview_url", port, expires_in_seconds)
        return SignedPreviewUrl(self.local.url, "preview-token")


class Daytona:
    def __init__(self, config: DaytonaConfig | None = None) -> None:
        _record("Daytona")

    def create(self, params: Any, timeout: float = 60, **kwargs: Any) -> Sandbox:
        fields = dict(params.kwargs)
        env = fields.pop("env_vars", None) or {}
        _record(
            "create",
            type(params).__name__,
            {**fields, "env_vars": sorted(env)},
            timeout,
            kwargs,
        )
        if CREATE_GATE is not None:
            CREATE_GATE.wait(30)
        local = LocalSandbox(env)
        SANDBOXES.append(local)
        return Sandbox(local)

    def delete(self, sandbox: Sandbox) -> None:
        _record("delete", sandbox.id)
        sandbox.local.kill()
