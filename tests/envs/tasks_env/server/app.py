"""ASGI app: `uvicorn server.app:app` from the env's folder (`--app-dir` it), as a UV
launch of the folder runs it."""

from openenv.core.env_server.http_server import create_app

try:  # installed as the `tasks_env` package
    from ..models import SumAction, SumObservation, SumState
    from .environment import SumEnvironment
except ImportError:  # run from the env's folder: `uvicorn server.app:app`
    from models import SumAction, SumObservation, SumState
    from server.environment import SumEnvironment

app = create_app(
    SumEnvironment,
    SumAction,
    SumObservation,
    env_name="tasks_env",
    max_concurrent_envs=16,
    state_cls=SumState,
)
