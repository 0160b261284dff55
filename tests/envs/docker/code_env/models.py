"""Wire models of the run-code env."""

from openenv.core.env_server.types import Action, Observation
from pydantic import Field


class CodeAction(Action):
    code: str = Field(description="Python source to run with `python3 -c`.")


class CodeObservation(Observation):
    message: str = Field(default="", description="What happened.")
    stdout: str = Field(default="", description="The code's standard output.")
    exit_code: int | None = Field(default=None, description="Its exit status.")
