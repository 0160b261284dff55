import os
from collections.abc import Iterator

import pytest

from tests.lifetime import bind_children_to_this_run
from tests.servers import TEST_ENVS, TEST_RUN_VAR, WORDLE_APP, uvicorn_server

# `real_docker`: a real Docker engine and the stand-in OpenEnv base image; `cloud`:
# the stand-in SDKs of OpenEnv's cloud providers.
pytest_plugins = ["tests.real_docker", "tests.cloud", "tests.cpu_usage"]


def pytest_configure(config: pytest.Config) -> None:
    # Where PYTHONDONTWRITEBYTECODE is set (this machine sets it), every Python process
    # compiles what it imports from source, every time: an eval spent ~4 of its ~7 s
    # of CPU doing so, an env server ~3 of 6. The processes of this run (xdist
    # workers included, which start after this hook) cache their bytecode.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if not hasattr(config, "workerinput"):  # the run itself, not an xdist worker
        os.environ[TEST_RUN_VAR] = str(os.getpid())
    # Every process a test starts dies with this test run, however it ends (see
    # tests/lifetime.py); proved by tests/test_lifetime.py.
    bind_children_to_this_run(xdist_worker=hasattr(config, "workerinput"))


@pytest.fixture(scope="session")
def wordle_url() -> Iterator[str]:
    """The local Wordle env, served directly (base_url mode)."""
    with uvicorn_server(WORDLE_APP) as url:
        yield url


@pytest.fixture(scope="session")
def counter_url() -> Iterator[str]:
    """The MCP counter env with OpenEnv's generic call-tool action."""
    with uvicorn_server("counter_env:app", app_dir=TEST_ENVS) as url:
        yield url


@pytest.fixture(scope="session")
def subclassed_counter_url() -> Iterator[str]:
    """The MCP counter env whose action subclasses CallToolAction."""
    with uvicorn_server("counter_env:subclassed_app", app_dir=TEST_ENVS) as url:
        yield url


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers more than cores. A test spends much of its time
    waiting on the processes it starts: with one worker per core the suite kept 1.3
    of 2 cores busy; with three workers, the 0.2 suite's tests used 1.45 (722 s of
    wall), with four 1.5 (616 s, with ~12% less CPU from other changes), its
    servers' readiness bounds holding at a load of about 5."""
    return (os.cpu_count() or 1) + 2


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]):
    """Tests marked `long` go first: pytest-xdist hands tests out in collection
    order (after its groups, the largest first), so a long test collected late
    starts when the others are nearly done and ends the run alone; started first,
    its waiting overlaps their work. The sort is stable: every worker collects the
    same order, as pytest-xdist requires.

    `--dist loadgroup` sends the tests of an `xdist_group` to one worker by adding
    `@<group>` to their node ids; on pytest 9.2 that suffix no longer takes and the
    groups ran spread over workers (pytest-dev/pytest-xdist#1386). Add it where
    pytest keeps node ids now (in each worker, after pytest-xdist's own try)."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
    if not getattr(config.option, "loadgroup", False):
        return
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # an older pytest, where pytest-xdist's own suffix takes
        return
    for item in items:
        groups = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        suffix = "@" + "_".join(sorted(groups))
        if groups and not item.nodeid.endswith(suffix):
            item._id = coerce_node_id(item.nodeid + suffix)
