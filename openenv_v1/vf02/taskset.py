"""Tasks, their scoring and stop conditions: the verifiers face of an OpenEnv episode.

    taskset = OpenEnvTaskset(OpenEnvConfig(env="openenv/wordle", resets=[{"seed": 1}]))
    tasks = taskset.load()   # one OpenEnvTask per reset, name "openenv/wordle#0"
    OpenEnvConfig(base_url=url, split="test", num_tasks=50)   # the env's own tasks

The user simulator (`OpenEnvUser`) plays the episode and keeps its account on the
rollout state; the task turns that account into the reward (`openenv_reward`, the sum
of step rewards), stop conditions and metrics. An environment failure ends the
rollout with a `UserError` naming the cause, after what was earned has been written
to `trace.info["openenv"]` and the metrics.

With native tool calling the taskset also declares the eval's tool server
(`openenv_v1.vf02.tools`), and the stops, which verifiers runs before every model
call, stamp the model turn on the state and count as invalid actions the calls of
the last reply the harness answered itself (a tool the model was not given,
arguments that are not a JSON object).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import cast

import verifiers.v1 as vf

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.pool import ServerPool
from openenv_v1.core.launch.url_pool import UrlPool
from openenv_v1.core.setting_names import render_settings
from openenv_v1.taskset_core import OpenEnvData, TasksetCore, prepare_eval_process
from openenv_v1.trace_account import publish_account
from openenv_v1.vf02.config import OpenEnvConfig, OpenEnvTaskConfig, OpenEnvUserConfig
from openenv_v1.vf02.flags import EVAL_FLAGS
from openenv_v1.vf02.null_harness import prepare_null_harness
from openenv_v1.vf02.simulator.forks import SimulatorForks
from openenv_v1.vf02.simulator.mcp_clients import share_tls_context
from openenv_v1.vf02.simulator.slots import (
    SimulatorSlots,
    default_alive,
    default_starting,
)
from openenv_v1.vf02.state import OpenEnvState
from openenv_v1.vf02.user import OpenEnvUser


def env_broke(message: str) -> vf.UserError:
    """The rollout's error for an env that failed the episode. verifiers answers the
    harness's pending model call with the error's `status_code` (502 by default) and
    logs each answer; the harness's OpenAI client retries a 5xx twice, so a failed
    rollout was logged three times. A 4xx is not retried: logged once."""
    error = vf.UserError(message)
    error.status_code = 400  # type: ignore[attr-defined]
    return error


class OpenEnvTask(vf.Task[OpenEnvData, OpenEnvState, OpenEnvTaskConfig]):
    user = OpenEnvUser
    slots: SimulatorSlots | None = None
    """The taskset's bound on simulators alive and starting (None: no bound)."""
    forks: SimulatorForks | None = None
    """The taskset's simulator fork server, launched as the taskset is built."""

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        """Before the harness's own setup and the simulator's launch: prepare
        verifiers' `null` harness for tools (`openenv_v1.vf02.null_harness`), wait
        for a simulator slot, wait until the fork server listens."""
        if self.data.tool_calls == "native":
            await prepare_null_harness(trace.agent.harness, runtime)
        if self.slots is not None:
            await self.slots.enter(trace)
        if self.forks is not None:
            await self.forks.started()

    @vf.stop
    async def openenv_done(self, trace: vf.Trace) -> bool:
        """The env reported `done`. Also where an env failure becomes the rollout's
        error: stops run before every model call, so it surfaces at once."""
        if self.slots is not None:
            self.slots.started(trace)  # it is serving: its start slot can go
        report = trace.state.account
        self._note_model_turns(trace)
        # The trace keeps the account even if the rollout errors before scoring.
        publish_account(trace.info, report, EVAL_FLAGS)
        if report.error:
            # A failed rollout is not scored: its metric is recorded here.
            trace.record_metric("openenv_ended_at_reset", float(report.ended_at_reset))
            raise env_broke(render_settings(report.error, EVAL_FLAGS))
        return report.stop_reason == "done"

    @vf.stop
    async def openenv_invalid_actions(self, trace: vf.Trace) -> bool:
        """`max_invalid_actions` invalid actions in a row ended the episode."""
        self._note_model_turns(trace)
        return trace.state.account.stop_reason == "invalid_actions"

    def _note_model_turns(self, trace: vf.Trace) -> None:
        """Native tool calling: stamp the model turns so far on the state, and count
        the tool calls of new replies the harness could not deliver (see the module
        docstring). Runs in the eval process before each model call."""
        state = trace.state
        turns = trace.num_turns
        if state.tools is None or turns <= state.turn:
            return
        names = {tool["name"] for tool in state.tools}
        for message in trace.assistant_messages[state.turn :]:
            for call in message.tool_calls or ():
                if call.name not in names or not _is_object(call.arguments):
                    state.account.count_invalid(self.config.user.max_invalid_actions)
        state.turn = turns

    async def finalize(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        """The final account onto the trace. The stops publish it before each model
        call; a rollout that ends without one after its last step (a turn limit, the
        harness ending) would otherwise keep the account of the step before."""
        publish_account(trace.info, trace.state.account, EVAL_FLAGS)

    @vf.reward
    async def openenv_reward(self, trace: vf.Trace) -> float:
        """The episode's reward (`reward`: sum or last). verifiers 0.2 has no
        unscored reward: an episode the env gave no reward scores 0.0 here, and
        `info.openenv.reward` None and metric `openenv_unscored` 1 say so."""
        return trace.state.account.final_reward() or 0.0

    @vf.metric
    async def openenv_unscored(self, trace: vf.Trace) -> float:
        return 0.0 if trace.state.account.scored else 1.0

    @vf.metric
    async def openenv_rewards_outside_range(self, trace: vf.Trace) -> float:
        """Step rewards outside the range the env's openenv.yaml declares."""
        return float(trace.state.account.rewards_outside)

    @vf.metric
    async def openenv_ended_at_reset(self, trace: vf.Trace) -> float:
        """1 for an episode the env's reset left nothing to play (it ended it there,
        or said it failed): such a rollout fails, and is recorded by the stop that
        raises its error; 0 here, for every rollout that is scored."""
        return float(trace.state.account.ended_at_reset)

    @vf.metric
    async def openenv_steps(self, trace: vf.Trace) -> float:
        return float(trace.state.account.steps)

    @vf.metric
    async def openenv_invalid_action_count(self, trace: vf.Trace) -> float:
        return float(trace.state.account.invalid_actions)

    @vf.metric
    async def openenv_resumed(self, trace: vf.Trace) -> float:
        """Times the episode resumed by replay on a fresh session, its own lost
        (`resume_lost_sessions`; `info.openenv.resumes` says where and what each cost)."""
        return float(len(trace.state.account.resumes))

    @vf.metric
    async def openenv_signals(self, trace: vf.Trace) -> dict[str, float]:
        """The env's named reward signals from its last step, if it reports any."""
        return {
            f"openenv_signal_{k}": v for k, v in trace.state.account.signals.items()
        }


def _is_object(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments or "{}"), dict)
    except json.JSONDecodeError:
        return False


class OpenEnvTaskset(vf.Taskset[OpenEnvTask, OpenEnvConfig]):
    """One task per reset. Building it settles this process for the eval, launches
    its simulator fork server (first: it imports for seconds, while the rest is
    built and verifiers starts), builds its `TasksetCore`, and starts the shared
    servers' pool (when `config.leases_servers()`), whose first env server comes up
    meanwhile too. Both are stopped by `close()`, at exit, or when building fails."""

    def __init__(self, config: OpenEnvConfig) -> None:
        super().__init__(config)
        prepare_eval_process(config.task.user.server_home)
        self.forks: SimulatorForks | None = None
        self.pool: ServerPool | UrlPool | None = None
        if config.fork_simulators and config.forks_simulators_here():
            self.forks = SimulatorForks.reserve()
            self.forks.launch()
        try:
            self.core = TasksetCore.build(config, config.task.user)
            if config.leases_servers():
                self.pool = self.core.start_pool()
            self.slots = self._simulator_slots()
            user = self._user_config()  # launches the pool's first server
            self._task_config = config.task.model_copy(update={"user": user})
        except BaseException:
            self.close()
            raise
        share_tls_context()  # verifiers opens an MCP client per user turn

    def _user_config(self) -> OpenEnvUserConfig:
        """What each rollout's user simulator is given: the episode settings with the
        env's manifest defaults (`TasksetCore.episode`), the pool's endpoint or else
        the forwarded values, and the fork server's socket."""
        update: dict[str, object] = {}
        if self.pool is not None:
            try:  # launches the first server: a bad option fails here
                update["pool_url"] = self.pool.serve_http()
            except EnvFailure as e:
                raise ValueError(render_settings(str(e), EVAL_FLAGS)) from None
        elif self.core.secret_env:
            # The rollout launches its server itself, from a process that may not see
            # these variables (verifiers strips *API_KEY* ones): hand the values over
            # in its config, which only ever travels in the process environment.
            update["secret_env"] = self.core.secret_env
        if self.forks is not None:
            update["simulator_forks"] = self.forks.socket_path
            update["simulator_forks_token"] = self.forks.token
        user = cast(OpenEnvUserConfig, self.core.episode)
        return user.model_copy(update=update)

    def _simulator_slots(self) -> SimulatorSlots | None:
        """The bound on simulators alive and starting, when they run on this host."""
        config = self.config
        if not config.gates_simulators():
            return None
        forked = self.forks is not None
        return SimulatorSlots(
            config.max_simulators or default_alive(forked),
            config.simulator_starts or default_starting(forked),
        )

    def tool_servers(self) -> list[vf.Toolset]:
        """Native tool calling: the eval's tool server, which forwards each call to
        the rollout's user simulator. Text mode: none."""
        if self.config.tool_calls != "native":
            return []
        from openenv_v1.vf02.tools import OpenEnvTools, OpenEnvToolsConfig

        return [OpenEnvTools(OpenEnvToolsConfig())]

    def close(self) -> None:
        """Stop the shared env servers and the simulator fork server, if any."""
        if self.pool is not None:
            self.pool.close()
        if self.forks is not None:
            self.forks.close()

    def _lease(self) -> tuple[str, Callable[[], None]]:
        """A shared server to list the env's tasks on (the pool's first, launched
        anyway) and its release."""
        assert self.pool is not None
        lease, url = self.pool.lease(os.getpid())
        return url, lambda: self.pool.release(lease) if self.pool else None

    def load(self) -> Iterator[OpenEnvTask]:
        # A `base_url` list's tasks are listed on its first server that answers.
        shared = self.pool is not None and not self.config.base_urls()
        lease = self._lease if shared else None
        for data in self.core.task_data(lease):
            task = OpenEnvTask(data, self._task_config)
            task.slots = self.slots
            task.forks = self.forks
            yield task
