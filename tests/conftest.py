from collections.abc import Iterator

import pytest

from tests.lifetime import bind_children_to_this_run
from tests.servers import TEST_ENVS, WORDLE_APP, uvicorn_server

# `real_docker`: a real Docker engine and the stand-in OpenEnv base image; `cloud`:
# the stand-in SDKs of OpenEnv's cloud providers.
pytest_plugins = ["tests.real_docker", "tests.cloud"]


def pytest_configure(config: pytest.Config) -> None:
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
