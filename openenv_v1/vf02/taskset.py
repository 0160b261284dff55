"""Tasks, their scoring and stop conditions: the verifiers face of an OpenEnv episode.

    taskset = OpenEnvTaskset(OpenEnvConfig(env="openenv/wordle", resets=[{"seed": 1}]))
    tasks = taskset.load()   # one OpenEnvTask per reset, name "openenv/wordle#0"
    OpenEnvConfig(base_url=url, split="test", num_tasks=50)   # the env's own tasks

Without `resets`, an env whose server offers OpenEnv's Task API gives the tasks
(`openenv_v1.core.tasks`): listed from `base_url`, or from the first server of the
shared-server pool (launched anyway), or else from a launch of its own for the
listing. The env folder's `openenv.yaml` (`openenv_v1.core.manifest`) sets default
episode budget and reward range and is checked for credentials when the taskset is
built.

The user simulator (`OpenEnvUser`) plays the episode and keeps its account on the
rollout state; the task turns that account into the reward (`openenv_reward`, the sum
of step rewards), stop conditions (`openenv_done`, `openenv_invalid_actions`) and
metrics. An environment failure ends the rollout with a `UserError` naming the cause,
after what was earned has been written to `trace.info["openenv"]` and the metrics.

With native tool calling (`tool_calls="native"`) the taskset also declares the eval's
tool server, `OpenEnvTools` (`openenv_v1.vf02.tools`), which forwards the model's tool calls
to the rollout's user simulator. The stops, which verifiers runs before every model
call, then also stamp the model turn on the state and count the calls of the last
reply that the harness answered itself without reaching the tool server (a tool the
model was not given, arguments that are not a JSON object) as invalid actions. The
model's side is the package's in-process harness (`openenv_v1.vf02.harness`) unless
`--harness.id` pins another; for verifiers' `null` harness the task's `setup`
prepares the program it runs (`openenv_v1.vf02.null_harness`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator

import verifiers.v1 as vf

from openenv_v1.core import EnvFailure, EnvTarget
from openenv_v1.core.episode.env_episode import warn_unknown_reset_kwargs
from openenv_v1.core.launch.plan import check_launcher
from openenv_v1.core.launch.pool import ServerPool
from openenv_v1.core.launch.server_env import hide_this_process, use_server_home
from openenv_v1.core.manifest import ManifestError, read_manifest
from openenv_v1.core.setting_names import render_settings
from openenv_v1.core.tasks import taskset_tasks
from openenv_v1.logs import route_to_verifiers
from openenv_v1.vf02.account import account, mirror
from openenv_v1.vf02.config import OpenEnvConfig, OpenEnvTaskConfig
from openenv_v1.vf02.null_harness import prepare_null_harness
from openenv_v1.vf02.simulator.forks import SimulatorForks
from openenv_v1.vf02.simulator.mcp_clients import share_tls_context
from openenv_v1.vf02.simulator.slots import (
    SimulatorSlots,
    default_alive,
    default_starting,
)
from openenv_v1.vf02.state import OpenEnvState
from openenv_v1.vf02.user import OpenEnvData, OpenEnvUser

logger = logging.getLogger(__name__)


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
    """The taskset's simulator fork server, started by the first rollout."""

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        """Runs before the harness's own setup, in the same runtime, and before
        verifiers launches the user simulator. Native tool calls with verifiers'
        `null` harness: prepare its program so that it works with tools
        (`openenv_v1.vf02.null_harness`). Then wait for a simulator slot."""
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
        state = trace.state
        self._note_model_turns(trace)
        _publish(trace)
        if state.error:
            raise env_broke(state.error)
        return state.stop_reason == "done"

    @vf.stop
    async def openenv_invalid_actions(self, trace: vf.Trace) -> bool:
        """`max_invalid_actions` invalid actions in a row ended the episode."""
        self._note_model_turns(trace)
        return trace.state.stop_reason == "invalid_actions"

    def _note_model_turns(self, trace: vf.Trace) -> None:
        """Native tool calling: stamp the model turns so far on the state, and count
        the tool calls of new replies the harness could not deliver (see the module
        docstring). Runs in the eval process before each model call."""
        state = trace.state
        turns = trace.num_turns
        if state.tools is None or turns <= state.turn:
            return
        names = {tool["name"] for tool in state.tools}
        report = account(state)
        for message in trace.assistant_messages[state.turn :]:
            for call in message.tool_calls or ():
                if call.name not in names or not _is_object(call.arguments):
                    report.count_invalid(self.config.user.max_invalid_actions)
        mirror(report, state)
        state.turn = turns

    async def finalize(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        """The final account onto the trace. The stops publish it before each model
        call; a rollout that ends without one after its last step (a turn limit, the
        harness ending) would otherwise keep the account of the step before."""
        _publish(trace)

    @vf.reward
    async def openenv_reward(self, trace: vf.Trace) -> float:
        """The episode's reward (`reward`: sum or last). verifiers 0.2 has no
        unscored reward: an episode the env gave no reward scores 0.0 here, and
        `info.openenv.reward` None and metric `openenv_unscored` 1 say so."""
        return account(trace.state).final_reward() or 0.0

    @vf.metric
    async def openenv_unscored(self, trace: vf.Trace) -> float:
        return 0.0 if account(trace.state).scored else 1.0

    @vf.metric
    async def openenv_rewards_outside_range(self, trace: vf.Trace) -> float:
        """Step rewards outside the range the env's openenv.yaml declares."""
        return float(trace.state.rewards_outside)

    @vf.metric
    async def openenv_steps(self, trace: vf.Trace) -> float:
        return float(trace.state.steps)

    @vf.metric
    async def openenv_invalid_action_count(self, trace: vf.Trace) -> float:
        return float(trace.state.invalid_actions)

    @vf.metric
    async def openenv_signals(self, trace: vf.Trace) -> dict[str, float]:
        """The env's named reward signals from its last step, if it reports any."""
        return {f"openenv_signal_{k}": v for k, v in trace.state.signals.items()}


def _is_object(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments or "{}"), dict)
    except json.JSONDecodeError:
        return False


def _publish(trace: vf.Trace) -> None:
    """Mirror the episode account onto the trace, which keeps it even if the rollout
    errors before scoring (the state itself is never serialized)."""
    report = account(trace.state)
    trace.info["openenv"] = report.info()
    trace.info["openenv_timing"] = report.timing()


class OpenEnvTaskset(vf.Taskset[OpenEnvTask, OpenEnvConfig]):
    """One task per reset. When `config.shares_servers()`, building the taskset starts
    its `ServerPool`, so the first env server comes up while verifiers is still
    starting; the pool's servers are stopped by `close()` or at process exit. With
    simulators on this host it also picks the socket of its simulator fork server
    (`simulator_forks`), which the first rollout starts."""

    def __init__(self, config: OpenEnvConfig) -> None:
        config.require_target()
        super().__init__(config)
        route_to_verifiers()
        # This process holds API keys and the pool's token; its simulators inherit
        # the env servers' HOME (`server_env`).
        hide_this_process()
        use_server_home(config.task.user.server_home)
        share_tls_context()  # verifiers opens an MCP client per user turn
        user = config.task.user
        self.manifest = None
        if not config.base_url:
            try:
                self.manifest = read_manifest(user.provider_kwargs.get("project_path"))
            except ManifestError as e:
                raise ValueError(str(e)) from None
            user = user.with_manifest(self.manifest, "--taskset.task.user.forward-env")
        secret_env = config.forwarded_values()
        self.pool: ServerPool | None = None
        launch = EnvTarget(
            env=config.env,
            base_url=config.base_url,
            use_docker=bool(config.use_docker),
            provider=None if config.base_url else config.provider,
            provider_kwargs=user.provider_kwargs,
            secret_env=secret_env,
            launch_timeout_s=user.launch_timeout_s,
            web_ui=user.server_web_ui,
            cache_max_gb=user.cache_max_gb,
        )
        # A launcher that cannot be used (its SDK missing) fails here, not per rollout.
        try:
            check_launcher(launch)
        except EnvFailure as e:
            raise ValueError(render_settings(str(e), "vf02")) from None
        # Here rather than in the rollouts: their logs are not kept by verifiers.
        warn_unknown_reset_kwargs(launch, config.resets or [])
        self._launch = launch
        self.forks: SimulatorForks | None = None
        if config.fork_simulators and config.forks_simulators_here():
            # Forks the fork server from this process now, while it has one thread
            # (before the pool's start); the first rollout hands it its socket.
            self.forks = SimulatorForks.reserve(fork_now=True)
            user = user.model_copy(
                update={
                    "simulator_forks": self.forks.socket_path,
                    "simulator_forks_token": self.forks.token,
                }
            )
        if config.shares_servers():
            self.pool = ServerPool(
                launch,
                sessions_per_server=config.sessions_per_server,
                max_servers=config.max_servers,
                capacity_wait_s=user.capacity_wait_s,
            )
            try:  # launches the first server: a bad option fails here
                pool_url = self.pool.serve_http()
            except EnvFailure as e:
                raise ValueError(render_settings(str(e), "vf02")) from None
            user = user.model_copy(update={"pool_url": pool_url})
        elif secret_env and not config.base_url:
            # The rollout launches its server itself, from a process that may not see
            # these variables (verifiers strips *API_KEY* ones): hand the values over
            # in its config, which only ever travels in the process environment.
            user = user.model_copy(update={"secret_env": secret_env})
        self._task_config = config.task.model_copy(update={"user": user})
        forked = self.forks is not None
        self.slots = (
            SimulatorSlots(
                config.max_simulators or default_alive(forked),
                config.simulator_starts or default_starting(forked),
            )
            if config.gates_simulators()
            else None
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
        config = self.config
        source = config.base_url or config.env
        lease = self._lease if self.pool is not None else None
        try:
            planned, where = taskset_tasks(config, source, self._launch, lease)
        except EnvFailure as e:
            raise ValueError(render_settings(str(e), "vf02")) from None
        logger.info("%s: %d tasks from %s", source, where.taken, where.kind)
        for idx, plan in enumerate(planned):
            task = OpenEnvTask(
                OpenEnvData(
                    idx=idx,
                    name=plan.name,
                    prompt=None,
                    env=None if config.base_url else config.env,
                    base_url=config.base_url,
                    use_docker=bool(config.use_docker and not config.base_url),
                    provider=None if config.base_url else config.provider,
                    reset=plan.reset,
                    key=plan.key,
                    seed=plan.seed,
                    env_task=plan.env_task,
                    tool_calls=config.tool_calls,
                ),
                self._task_config,
            )
            task.slots = self.slots
            task.forks = self.forks
            yield task
