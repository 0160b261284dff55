"""The env's own tasks (OpenEnv's Task API, read from a running server) and the plan
of a taskset's tasks.

An OpenEnv 0.10 server whose env implements `TaskProvider` serves `GET
/list_environments`, `GET /{name}/splits`, `POST /{name}/num_tasks` and `POST
/{name}/task_range`; a task is played by `reset(split=..., index=...)`. A 404/405 (no
such routes, as on openenv-core 0.3.0) or a 501 (no `TaskProvider`) means none.

    api = read_task_api("http://127.0.0.1:8000")       # None: no Task API
    tasks = api.tasks(api.choose_split(None), offset=0, limit=100)

Only `num_tasks` and one `task_range` page per 256 tasks are read. A task's spec is
the env's metadata: it goes into the trace, never to the model. Everything the server
answers is untrusted (split names must be strings, counts non-negative integers).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

from openenv_v1.core.episode.env_source import python_files
from openenv_v1.core.errors import EnvFailure, describe
from openenv_v1.core.http_client import http_base, sync_client
from openenv_v1.core.manifest import local_project_dir

logger = logging.getLogger(__name__)
_T = TypeVar("_T")
_PAGE = 256
"""Tasks asked for per `task_range` request."""
_NO_TASK_API = (404, 405, 501)
SPLIT_PREFERENCE = {"eval": ("test", "validation"), "train": ("train",)}
"""Split types (or names) chosen by default, in order, for each purpose."""


@dataclass(frozen=True)
class Split:
    name: str
    type: str
    """`train`, `validation` or `test` (OpenEnv's normalized type)."""


@dataclass(frozen=True)
class EnvTask:
    split: str
    index: int
    spec: Any = None
    """What the env's `task_range` says about the task (None when it has no such
    route); metadata for the trace, never shown to the model."""

    @property
    def name(self) -> str:
        return f"{self.split}#{self.index}"


@dataclass(frozen=True)
class TaskApi:
    """The Task API of one server (`read_task_api`)."""

    base_url: str
    env_name: str
    splits: tuple[Split, ...]
    timeout_s: float = 30.0

    def choose_split(self, split: str | None, purpose: str = "eval") -> str:
        """`split` when the env has it (else an error naming the env's splits); unset,
        the env's split for `purpose` (`eval`: a test split, else a validation one;
        `train`: a train split), else its first."""
        names = [s.name for s in self.splits]
        if not names:
            raise EnvFailure(f"{self.base_url}: the env's Task API lists no splits")
        if split is not None:
            if split not in names:
                raise EnvFailure(
                    f"split {split!r} is not one of the env's splits "
                    f"({', '.join(names)}): set `split` to one of them"
                )
            return split
        for wanted in SPLIT_PREFERENCE.get(purpose, ()):
            for s in self.splits:
                if wanted in (s.type, s.name):
                    return s.name
        return names[0]

    def num_tasks(self, split: str) -> int:
        body = self._post("num_tasks", {"split": split})
        count = body.get("num_tasks") if isinstance(body, dict) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise EnvFailure(
                f"{self.base_url}: num_tasks for split {split!r} answered {body!r}, "
                "not a count"
            )
        return count

    def tasks(
        self, split: str, offset: int = 0, limit: int | None = None
    ) -> list[EnvTask]:
        """Tasks `offset` to `offset + limit` of `split` (to its end when `limit` is
        None), each with its spec when the env serves `task_range`."""
        count = self.num_tasks(split)
        stop = count if limit is None else min(count, offset + limit)
        if offset >= stop:
            return []
        specs: list[Any] = []
        for start in range(offset, stop, _PAGE):
            page = self._range(split, start, min(stop, start + _PAGE))
            if page is None:  # no task_range: indices only
                specs = [None] * (stop - offset)
                break
            specs += page
        return [EnvTask(split, offset + i, spec) for i, spec in enumerate(specs)]

    def _range(self, split: str, start: int, stop: int) -> list[Any] | None:
        try:
            body = self._post(
                "task_range", {"split": split, "start": start, "stop": stop}
            )
        except _NotServed:
            return None
        tasks = body.get("tasks") if isinstance(body, dict) else None
        if not isinstance(tasks, list):
            return None
        # An env may answer short or long: pad or cut to the range asked for.
        tasks = tasks[: stop - start]
        return tasks + [None] * (stop - start - len(tasks))

    def _post(self, route: str, body: dict[str, Any]) -> Any:
        url = f"{self.base_url}/{self.env_name}/{route}"
        return _json(url, self.timeout_s, body)


class _NotServed(Exception):
    """The route answered 404, 405 or 501."""


def _json(url: str, timeout_s: float, body: dict[str, Any] | None = None) -> Any:
    try:
        with sync_client(timeout_s) as http:
            response = http.post(url, json=body) if body is not None else http.get(url)
    except httpx.HTTPError as e:
        raise EnvFailure(f"{url}: {describe(e)}") from e
    if response.status_code in _NO_TASK_API:
        raise _NotServed(url)
    if response.status_code != 200:
        raise EnvFailure(
            f"{url} answered {response.status_code}: {response.text[:300]}"
        )
    try:
        return response.json()
    except ValueError as e:
        raise EnvFailure(f"{url} answered with no JSON: {response.text[:300]}") from e


def read_task_api(base_url: str, timeout_s: float = 30.0) -> TaskApi | None:
    """The server's Task API, or None when it offers none (404 / 501)."""
    base = base_url.rstrip("/")
    try:
        names = _json(f"{base}/list_environments", timeout_s)
        if not isinstance(names, list) or not names or not isinstance(names[0], str):
            return None
        env_name = names[0]
        raw = _json(f"{base}/{env_name}/splits", timeout_s)
    except _NotServed:
        return None
    if not isinstance(raw, list):
        raise EnvFailure(f"{base}/{env_name}/splits answered {raw!r}, not a list")
    splits = []
    for entry in raw:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            kind = entry.get("type")
            splits.append(Split(entry["name"], kind if isinstance(kind, str) else ""))
        elif isinstance(entry, str):
            splits.append(Split(entry, entry))
    return TaskApi(base, env_name, tuple(splits), timeout_s)


def list_launched(target: Any, list_tasks: Any) -> Any:
    """Launch `target` (an `EnvTarget`) once, call `list_tasks(base_url)` on it, and
    stop it. Runs on a thread of its own, so it works inside a running event loop."""
    from openenv_v1.core.launch.target import open_env

    async def launch_and_list() -> Any:
        async with contextlib.AsyncExitStack() as stack:
            client = await open_env(target, stack)
            url = http_base(client.base_url or target.label)
            return await asyncio.to_thread(list_tasks, url)

    with ThreadPoolExecutor(1, thread_name_prefix="openenv-v1-task-listing") as pool:
        return pool.submit(asyncio.run, launch_and_list()).result()


@dataclass(frozen=True)
class PlannedTask:
    """One task of a taskset, whichever line runs it."""

    name: str
    reset: dict[str, Any]
    """The reset kwargs as configured (with `split` and `index` for an env task)."""
    key: str
    """`task_key`: what the task is, not where it sits in a list."""
    seed: int | None = None
    """The seed every rollout of the task resets with (`shared_seed`), when its
    kwargs carry none; None: the env picks."""
    env_task: Any = None
    """The env's spec of an env task (metadata: the trace's, never the model's)."""


@dataclass(frozen=True)
class TaskSource:
    """Where a taskset's tasks came from, as `check` and the logs say it."""

    kind: str
    """`resets`, `env tasks` or `default reset`."""
    split: str | None = None
    splits: tuple[Split, ...] = ()
    taken: int = 0


def plan_tasks(
    source: str | None,
    resets: list[dict[str, Any]] | None,
    api: TaskApi | None,
    *,
    split: str | None = None,
    num_tasks: int | None = None,
    task_offset: int = 0,
    seeded: bool = True,
    purpose: str = "eval",
) -> tuple[list[PlannedTask], TaskSource]:
    """The tasks of a taskset: the env's own when `api` is given (`split`, from
    `task_offset`, at most `num_tasks`, each reset with `split` and `index` plus each
    entry of `resets`), else one per entry of `resets`."""
    if api is None:
        if split is not None:
            raise EnvFailure(
                f"split {split!r} is set, but {source} offers no Task API (OpenEnv's "
                "TaskProvider: its server answers 404/501, or its source defines no "
                "list_splits): drop `split` and give `resets`"
            )
        kind = "resets" if resets is not None else "default reset"
        seen: dict[str, int] = {}
        planned = []
        for i, reset in enumerate(resets if resets is not None else [{}]):
            # The n-th copy of one reset is a task of its own, keyed as such.
            blob = json.dumps(reset, sort_keys=True, default=str)
            copy = seen[blob] = seen.get(blob, -1) + 1
            name = f"{source}#{i}"
            planned.append(_planned(name, dict(reset), source, seeded, copy=copy))
        return planned, TaskSource(kind, taken=len(planned))
    chosen = api.choose_split(split, purpose)
    env_tasks = api.tasks(chosen, task_offset, num_tasks)
    extras = resets if resets is not None else [{}]
    planned = []
    for task in env_tasks:
        for j, extra in enumerate(extras):
            name = task.name if len(extras) == 1 else f"{task.name}.{j}"
            reset = {**extra, "split": task.split, "index": task.index}
            planned.append(_planned(name, reset, source, seeded, task.spec))
    return planned, TaskSource("env tasks", chosen, api.splits, taken=len(planned))


def _planned(
    name: str,
    reset: dict[str, Any],
    source: str | None,
    seeded: bool,
    spec: Any = None,
    copy: int = 0,
) -> PlannedTask:
    key = task_key(source, reset, copy)
    seed = shared_seed(key) if seeded and "seed" not in reset else None
    return PlannedTask(name, reset, key, seed, spec)


def reset_kwargs(reset: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """The kwargs a rollout resets with: the task's, plus its shared seed if any."""
    return dict(reset) if seed is None else {"seed": seed, **reset}


def defines_tasks(source_dir: str) -> bool:
    """Whether the env's local source defines a `TaskProvider` (`def list_splits`)."""
    for path in python_files(Path(source_dir)):
        with contextlib.suppress(OSError):
            if "def list_splits" in path.read_text(errors="replace"):
                return True
    return False


def with_task_api(
    target: Any,
    lease: Callable[[], tuple[str, Callable[[], None]]] | None,
    use: Callable[[TaskApi | None], _T],
) -> _T:
    """`use(api)` with the Task API of `target`'s server (None: it offers none). The
    server: `target.base_url`; else the first of `target.base_urls` that answers;
    else one `lease()`d from the shared pool (its URL and the release); else a launch
    for the listing only (`list_launched`)."""
    if target.base_url:
        return use(read_task_api(target.base_url))
    if target.base_urls:
        return use(_first_task_api(target.base_urls))
    if lease is not None:
        url, release = lease()
        try:
            return use(read_task_api(url))
        finally:
            release()
    return list_launched(target, lambda url: use(read_task_api(url)))


def _first_task_api(urls: Sequence[str]) -> TaskApi | None:
    """The Task API of the first server of `urls` that answers; raises the last
    failure when none does."""
    failure: EnvFailure | None = None
    for url in urls:
        try:
            return read_task_api(url)
        except EnvFailure as e:
            logger.warning("%s: cannot list the env's tasks (%s)", url, e)
            failure = e
    assert failure is not None
    raise failure


def taskset_tasks(
    settings: Any,
    source: str | None,
    target: Any,
    lease: Callable[[], tuple[str, Callable[[], None]]] | None = None,
) -> tuple[list[PlannedTask], TaskSource]:
    """The tasks of a taskset with `settings` (`openenv_v1.settings.TaskSettings`):
    the env's own when `resets` is unset (or `split` set) and its server offers the
    Task API, else its `resets`. The server is asked only where that cannot be a
    launch in vain: a `base_url`, a source that defines `list_splits`, or `split`."""

    def plan(api: TaskApi | None) -> tuple[list[PlannedTask], TaskSource]:
        return plan_tasks(
            source,
            settings.resets,
            api,
            split=settings.split,
            num_tasks=settings.num_tasks,
            task_offset=settings.task_offset,
            seeded=settings.shared_seed,
        )

    if settings.split is not None:
        return with_task_api(target, lease, plan)
    if settings.resets is not None:
        return plan(None)
    if not target.connects:
        source_dir = local_project_dir(target.provider_kwargs)
        if source_dir is None or not defines_tasks(source_dir):
            return plan(None)
    try:
        return with_task_api(target, lease, plan)
    except EnvFailure as e:
        # Unasked for: a server that cannot be listed now keeps today's default
        # task, whose rollout then meets (and reports) the same failure.
        logger.warning(
            "%s: could not read the env's tasks (%s); running one empty reset "
            "(set `split` to require the env's tasks, or give `resets`)",
            target.label,
            e,
        )
        return plan(None)


def task_key(source: str | None, reset: Mapping[str, Any], copy: int = 0) -> str:
    """A task's stable identity: its env and its reset kwargs, not its position in a
    list; `copy` counts earlier tasks with the same kwargs (keys stay unique)."""
    what: dict[str, Any] = {"env": source, "reset": reset}
    if copy:
        what["copy"] = copy
    blob = json.dumps(what, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def shared_seed(key: str) -> int:
    """The seed every rollout of the task keyed `key` resets with (31 bits)."""
    return int(key[:8], 16) & 0x7FFF_FFFF


__all__ = [
    "EnvTask",
    "PlannedTask",
    "TaskSource",
    "plan_tasks",
    "reset_kwargs",
    "Split",
    "TaskApi",
    "list_launched",
    "defines_tasks",
    "with_task_api",
    "read_task_api",
    "shared_seed",
    "task_key",
    "taskset_tasks",
]
