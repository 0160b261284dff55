"""CPU seconds per test, summed per file, printed at the end of a run.

A test's CPU is the user+sys time its process (the xdist worker, with its threads)
spent from the start of the test's setup to the end of its teardown, plus that of
the processes the test started and reaped in that time (`RUSAGE_CHILDREN`: a child
counts once it has been waited for, with the children it reaped in turn), and that
of the evals the test forked from the eval zygote (`tests/zygote.py`, whose
reapers report it). What it misses: processes that outlive their test (a session
server counts for the test that stops it, at the end of the run) and orphans nobody
of this run reaps. The
measure is of this run's own work, so it holds on a machine other jobs share,
where wall times do not.

`--cpu-json PATH` writes every test's figures (`cpu`, `wall`, `start` as a Unix
time, `worker`: the schedule a run kept) by node id to PATH;
`--cpu-top N` sets how many files and tests the summary lists (15).
"""

from __future__ import annotations

import json
import resource
import time
from collections import defaultdict
from pathlib import Path

import pytest

__all__: list[str] = []

_KEY = "cpu_usage"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cpu usage")
    group.addoption("--cpu-json", default=None, help="write each test's CPU here")
    group.addoption("--cpu-top", type=int, default=15, help="files and tests listed")


def _cpu() -> float:
    from tests import zygote

    total = zygote.forked_cpu
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


_started: dict[str, tuple[float, float, float]] = {}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _started[item.nodeid] = (_cpu(), time.monotonic(), time.time())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if call.when == "teardown" and item.nodeid in _started:
        cpu, wall, start = _started.pop(item.nodeid)
        worker = getattr(item.config, "workerinput", {}).get("workerid", "main")
        # user_properties travel with the report to xdist's controller.
        report.user_properties.append(
            (
                _KEY,
                {
                    "cpu": _cpu() - cpu,
                    "wall": time.monotonic() - wall,
                    "start": start,
                    "worker": worker,
                },
            )
        )


class _Summary:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.tests: dict[str, dict[str, float]] = {}
        self.started = time.monotonic()
        self.cpu_at_start = _cpu()

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        for name, value in report.user_properties:
            if name == _KEY:
                self.tests[report.nodeid] = value

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.tests:
            return
        top = self.config.getoption("cpu_top")
        by_file: dict[str, float] = defaultdict(float)
        for nodeid, value in self.tests.items():
            by_file[nodeid.split("::", 1)[0]] += value["cpu"]
        total = sum(by_file.values())
        write = terminalreporter.write_line
        terminalreporter.section("CPU seconds (tests/cpu_usage.py)")
        for path, cpu in sorted(by_file.items(), key=lambda kv: -kv[1])[:top]:
            write(f"{cpu:8.1f} s  {path}")
        write("")
        ranked = sorted(self.tests.items(), key=lambda kv: -kv[1]["cpu"])
        for nodeid, value in ranked[:top]:
            write(f"{value['cpu']:8.1f} s  {nodeid}")
        write("")
        # The run's own CPU covers what no test's does: collection in each worker,
        # session fixtures' servers reaped at the end are counted by the test then.
        wall = time.monotonic() - self.started
        write(
            f"tests' CPU: {total:.1f} s over {len(self.tests)} tests; wall {wall:.1f} s"
        )
        path = self.config.getoption("cpu_json")
        if path:
            Path(path).write_text(json.dumps(self.tests, indent=1, sort_keys=True))


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the run itself, not an xdist worker
        config.pluginmanager.register(_Summary(config), "cpu_usage_summary")
