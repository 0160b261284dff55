"""The `openenv-v1` command.

    openenv-v1 check ENV_ID --project-path P --app A   launch with UV and check
    openenv-v1 check --base-url URL                    check a running server
    openenv-v1 demo                                    offline Wordle eval, end to end
    openenv-v1 init NAME --project-path P              a taskset package for one env
    openenv-v1 cache [prune [--all | --older-than D]]  list or prune what launches keep

All but `cache` need one of the package's extras (`pip install 'openenv-v1[vf02]'` or
`'openenv-v1[vf04]'`); without it they say which to install and exit 1.

Exit codes: 0 success, 1 the check or the demo failed (or an extra is missing), 2 bad
arguments, 130 interrupted. Whatever a command started is stopped before it exits, on Ctrl-C too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, NoReturn

from openenv_v1.cli.cache import add_cache_parser, run_cache
from openenv_v1.cli.extras import missing_extra
from openenv_v1.cli.flags import (
    CHECK_FLAGS,
    add_setting_flags,
    given_settings,
    json_value,
)
from openenv_v1.cli.procs import reap_child_groups, stop_child_groups
from openenv_v1.core.setting_names import render_settings

if TYPE_CHECKING:
    from pydantic import ValidationError

    from openenv_v1.core.launch.target import EnvTarget
    from openenv_v1.settings import EpisodeSettings


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="openenv-v1", description="Check OpenEnv environments; run the demo."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_check(commands)
    _add_demo(commands)
    _add_init(commands)
    add_cache_parser(commands)
    return parser


def _add_check(commands: Any) -> None:
    check = commands.add_parser(
        "check",
        help="launch or connect to an env as a rollout does, and report what it found",
        description=(
            "Launch (UV by default, Docker with --use-docker, or the --provider named) "
            "or connect to (--base-url) "
            "an OpenEnv env exactly as a rollout does, then report its health, "
            "metadata, action schema or MCP tools, the first observation, one optional "
            "step, a seed check and its session capacity."
        ),
    )
    check.add_argument(
        "env_id",
        nargs="?",
        metavar="ENV_ID",
        help="OpenEnv / Hugging Face Space id to launch (e.g. openenv/wordle)",
    )
    check.add_argument(
        "--base-url",
        action="append",
        metavar="URL",
        help="a running server: connect only; repeat it to check several (as a "
        "base_url list spreads an eval over them): each is checked and reported, "
        "and the exit is non-zero if any fails",
    )
    check.add_argument("--project-path", help="local checkout of the env (no clone)")
    check.add_argument("--app", help="ASGI app to serve, e.g. pkg.server.app:app")
    add_setting_flags(check)
    check.add_argument(
        "--reset",
        type=json_value("--reset", dict),
        default={},
        metavar="JSON",
        help="reset kwargs (default {}), e.g. '{\"seed\": 1}'",
    )
    check.add_argument(
        "--action",
        metavar="REPLY",
        help="one step, written as a model reply: a JSON action (or bare text when "
        "the action has one required string field)",
    )
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument(
        "--probe-sessions",
        type=int,
        default=4,
        metavar="N",
        help="concurrent sessions to try when probing capacity (default 4; 0 skips)",
    )


def _replies(text: str) -> list[str]:
    """`--replies`: a non-empty JSON list; a reply given as a JSON object is sent as
    its JSON text."""
    if not (value := json_value("--replies", list)(text)):
        raise argparse.ArgumentTypeError("--replies must be a non-empty JSON list")
    return [v if isinstance(v, str) else json.dumps(v) for v in value]


def _add_demo(commands: Any) -> None:
    demo = commands.add_parser(
        "demo",
        help="offline, keyless: eval the local Wordle env with the scripted policy",
        description=(
            "Start the local Wordle env (shipped in this package) and the local "
            "scripted policy, run a real eval of openenv-wordle-v1 on them "
            "(verifiers 0.2: `eval`; 0.4: `vf-eval`), print a summary, stop "
            "everything."
        ),
    )
    demo.add_argument("--episodes", type=int, default=5, help="games (default 5)")
    demo.add_argument(
        "--taskset",
        metavar="ID",
        help="eval this taskset (e.g. a package `openenv-v1 init` wrote) with its own "
        "env settings instead of the local Wordle env; with --replies",
    )
    demo.add_argument(
        "--replies",
        type=_replies,
        help="the scripted policy's replies, a JSON list played in order (the last "
        "one repeated), instead of the Wordle solver",
    )
    demo.add_argument(
        "--concurrency", type=int, default=3, help="games in flight (default 3)"
    )
    demo.add_argument(
        "--env-port", type=int, default=0, help="Wordle env port (default: free)"
    )
    demo.add_argument(
        "--policy-port", type=int, default=0, help="policy port (default: free)"
    )
    demo.add_argument(
        "--tool-calls",
        choices=("text", "native"),
        default="text",
        help="how the policy acts: text replies (default) or native tool calls "
        "of the env's `act` tool (--taskset.tool-calls; on verifiers 0.4 "
        "--env.taskset.tool-calls)",
    )
    demo.add_argument(
        "--output-dir",
        help="where the eval writes config.toml, eval.log and traces.jsonl "
        "(default: under outputs/, named as verifiers names the run)",
    )


def _add_init(commands: Any) -> None:
    init = commands.add_parser(
        "init",
        help="write a taskset package for one env, for both verifiers lines",
        description=(
            "Check the env (as `openenv-v1 check` does), then write ./NAME: a "
            "package whose taskset `eval NAME` (verifiers 0.2) and `vf-eval NAME` "
            "(0.4) load, with the env's launch defaults as check found them, a "
            "README and a test (check, and one episode with a scripted policy)."
        ),
    )
    init.add_argument(
        "name", metavar="NAME", help="package and taskset id, e.g. my-env-v1"
    )
    where = init.add_mutually_exclusive_group(required=True)
    where.add_argument("--env", help="an OpenEnv env id or Space (launched with UV)")
    where.add_argument(
        "--project-path", help="the env's local folder (launched with UV)"
    )
    where.add_argument("--base-url", help="a running server: connect only")
    init.add_argument(
        "--app", help="ASGI app, if check cannot find it (pkg.server.app:app)"
    )
    init.add_argument("--dir", help="where NAME is written (default: here)")


def main(argv: list[str] | None = None) -> NoReturn:
    args = build_parser().parse_args(argv)
    if problem := missing_extra(args.command):
        print(f"openenv-v1 {args.command}: error: {problem}", file=sys.stderr)
        sys.exit(1)
    try:
        if args.command == "check":
            code = _check(args)
        elif args.command == "init":
            from openenv_v1.cli.init import run_init

            code = run_init(args)
        elif args.command == "cache":
            code = run_cache(args)
        else:
            from openenv_v1.cli.demo import run_demo

            code = run_demo(args)
    finally:
        reap_child_groups()
    sys.exit(code)


def _usage_error(command: str, message: str) -> NoReturn:
    print(f"openenv-v1 {command}: error: {message}", file=sys.stderr)
    sys.exit(2)


def _check(args: argparse.Namespace) -> int:
    """`check` of the target the flags give, or of each `--base-url` in turn (each
    report printed as it is done: text reports a blank line apart, `--json` one
    object a line). Non-zero if any failed; 130 at once when interrupted."""
    code = 0
    for i, url in enumerate(args.base_url or [None]):
        if i and not args.json:
            print()
        code = max(code, _check_one(args, url))
        if code == 130:
            break
    return code


def _check_one(args: argparse.Namespace, base_url: str | None) -> int:
    # openenv is imported here, not at start-up: `--help` and `demo` stay quick.
    from openenv_v1.cli.check import CheckOptions, CheckReport, run_check
    from openenv_v1.cli.check_report import Failure, describe_target
    from openenv_v1.cli.check_text import render_report

    target, episode = _settings(args, base_url)
    options = CheckOptions(
        target=target,
        episode=episode,
        reset=args.reset,
        action=args.action,
        probe_sessions=max(0, args.probe_sessions),
    )
    report = CheckReport(target=describe_target(target))
    if base_url and (args.env_id or args.project_path or args.app):
        report.warnings.append(
            "--base-url connects only: ENV_ID and launch options are ignored"
        )

    def progress(line: str) -> None:
        if not args.json:
            print(f"openenv-v1 check: {line}", file=sys.stderr, flush=True)

    interrupted = _run_interruptible(run_check(options, report, progress))
    if interrupted:
        reap_child_groups()
        report.failure = Failure(
            report.stage, "interrupted; everything it launched has been stopped", None
        )
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, default=str))
    else:
        print(render_report(report))
    if interrupted:
        return 130
    return 0 if report.ok else 1


def _settings(
    args: argparse.Namespace, base_url: str | None
) -> tuple[EnvTarget, EpisodeSettings]:
    """The `EnvTarget` and episode settings a rollout with the settings the flags
    give would use, built as the bindings build them (`openenv_v1.settings`), with
    this command's flags named in its errors."""
    from pydantic import ValidationError

    from openenv_v1.settings import (
        EnvSettings,
        EpisodeSettings,
        UnsetVariables,
        env_target,
        forwarded_values,
    )

    kwargs = dict(args.provider_kwargs)
    if args.project_path:
        kwargs["project_path"] = args.project_path
    if args.app:
        kwargs["app"] = args.app
    try:
        place = EnvSettings(
            env=args.env_id, base_url=base_url, **given_settings(args, EnvSettings)
        )
        episode = EpisodeSettings(
            **given_settings(args, EpisodeSettings) | {"provider_kwargs": kwargs}
        )
    except ValidationError as e:
        _usage_error("check", _invalid(e))
    path = episode.provider_kwargs.get("project_path")
    if not place.env and not place.base_url:
        if not path:
            _usage_error(
                "check", "give ENV_ID (to launch), --base-url, or --project-path"
            )
        place.env = f"local/{os.path.basename(str(path).rstrip('/'))}"
    try:
        secret_env = forwarded_values(episode.forward_env)
    except UnsetVariables as e:
        _usage_error(
            "check",
            f"--forward-env {' '.join(e.names)}: not set in this environment; "
            "export it, or drop the flag",
        )
    return env_target(place, episode, secret_env=secret_env), episode


def _invalid(error: ValidationError) -> str:
    """What `error` found, each setting named by its flag: a bound or type a value
    breaks is prefixed by the flag; the settings' own checks name theirs."""
    found = []
    for e in error.errors():
        text = e["msg"].removeprefix("Value error, ")
        if e["type"] != "value_error" and e["loc"]:
            text = f"{CHECK_FLAGS.flag(str(e['loc'][0]))}: {text}"
        found.append(text)
    return render_settings("; ".join(found), CHECK_FLAGS)


def _run_interruptible(coro: Coroutine[Any, Any, None]) -> bool:
    """Run `coro`; on SIGINT or SIGTERM cancel it (its exit stacks then stop what was
    launched) and return True.

    A launch may be waiting for its server to get ready when the signal comes, and that
    wait does not end on cancellation alone; the process groups this command started
    are therefore sent SIGTERM right away (a second signal sends SIGKILL), which ends
    the wait at once.
    """
    signals = (signal.SIGINT, signal.SIGTERM)
    count = 0

    async def supervised() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_signal(signum: int, frame: Any) -> None:
            nonlocal count
            count += 1
            stop_child_groups(signal.SIGTERM if count == 1 else signal.SIGKILL)
            loop.call_soon_threadsafe(task.cancel)

        previous = {s: signal.signal(s, on_signal) for s in signals}
        try:
            await coro
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)

    try:
        asyncio.run(supervised())
    except (asyncio.CancelledError, KeyboardInterrupt):
        return True
    return count > 0
