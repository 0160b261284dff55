"""A setting the core names is rendered as the surface the user is on sets it: the
verifiers 0.2 flag (a field of this line's config), `check`'s flag (an option of its
parser), and, where the text went as it is, a name that still reads as the setting.
The verifiers 0.4 spellings are checked against that line's config in
tests/vf04/test_vf_setting_names.py."""

import contextlib
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from openenv_v1 import OpenEnvConfig
from openenv_v1.cli import build_parser, main
from openenv_v1.cli.check_report import CheckReport
from openenv_v1.cli.flags import CHECK_FLAGS, given_settings
from openenv_v1.core import EnvFailure, EnvTarget
from openenv_v1.core.launch.cloud import cloud_launch_plan
from openenv_v1.core.launch.env_project import AppChoice
from openenv_v1.core.launch.swarm.options import swarm_options
from openenv_v1.core.launch.swarm.service import SwarmService
from openenv_v1.core.launch.target import open_env
from openenv_v1.core.launch.uv import NO_GRADIO_DIR
from openenv_v1.core.launch.uv_diagnosis import (
    GRADIO_NEEDED,
    GRADIO_REFUSED,
    no_app_message,
)
from openenv_v1.core.setting_names import (
    SETTINGS,
    named_settings,
    render_settings,
    setting,
)
from openenv_v1.settings import EnvSettings, EpisodeSettings
from openenv_v1.vf04.flags import VF_EVAL_FLAGS
from tests.setting_spellings import SPELLINGS, SURFACES, field_at


@pytest.mark.parametrize("name", SPELLINGS)
def test_each_setting_is_rendered_as_each_surface_spells_it(name):
    text = f"raise {setting(name)} if it is just slow"
    for surface, spelled in zip(SURFACES, SPELLINGS[name], strict=True):
        assert render_settings(text, surface) == f"raise `{spelled}` if it is just slow"


@pytest.mark.parametrize("name", SPELLINGS)
def test_the_verifiers_02_spelling_is_a_field_of_its_config(name):
    flag = SPELLINGS[name][0]
    assert field_at(OpenEnvConfig, flag, "--taskset.")


def check_actions() -> dict[str, Any]:
    parser = build_parser()
    (commands,) = [a for a in parser._actions if a.dest == "command"]
    check = commands.choices["check"]
    return {option: a for a in check._actions for option in a.option_strings}


def check_options() -> set[str]:
    return set(check_actions())


def test_checks_setting_flags_take_the_settings_defaults_and_docstrings():
    args = build_parser().parse_args(["check", "x/y"])
    for model in (EnvSettings, EpisodeSettings):
        given = given_settings(args, model)
        defaults = {
            n: f.get_default(call_default_factory=True)
            for n, f in model.model_fields.items()
        }
        # `--timeout` bounds the capacity wait too: the reset timeout's default.
        defaults["capacity_wait_s"] = defaults.get("reset_timeout_s")
        assert given and given == {n: defaults[n] for n in given}
    assert set(given_settings(args, EpisodeSettings)) >= {
        "launch_timeout_s",
        "reset_timeout_s",
        "step_timeout_s",
        "observation_images",
        "max_observation_chars",
    }
    actions = check_actions()
    launch = actions["--launch-timeout"]
    assert launch.help.startswith("Seconds a launched server may take to answer")
    assert launch.help.endswith("(default %(default)s)") and launch.default == 120.0
    assert "`--base-url`" in actions["--use-docker"].help  # spelled as check sets it
    assert actions["--max-observation-chars"].type is int


@pytest.mark.parametrize("name", SPELLINGS)
def test_the_check_spelling_is_a_flag_of_check_or_the_settings_own_name(name):
    spelled = SPELLINGS[name][2]
    if spelled == name:  # no flag: `check` has no such setting
        assert not {o for o in check_options() if o.startswith(f"--{name[:4]}")}
        return
    flag, _, value = spelled.partition(" ")
    assert flag in check_options()
    if value:  # a provider_kwargs key, set through --provider-kwargs JSON
        key = name.partition(".")[2]
        assert json.loads(value.strip("'").replace("...", "null")) == {key: None}


@pytest.mark.parametrize(
    ("name", "value", "spelled"),
    [
        (
            "provider_kwargs.egress",
            True,
            (
                "--taskset.task.user.provider-kwargs.egress true",
                "--env.taskset.provider-kwargs.egress true",
                "--provider-kwargs '{\"egress\": true}'",
            ),
        ),
        (
            "provider_kwargs.user",
            "root",
            (
                "--taskset.task.user.provider-kwargs.user root",
                "--env.taskset.provider-kwargs.user root",
                '--provider-kwargs \'{"user": "root"}\'',
            ),
        ),
        (
            "provider_kwargs.app",
            "pkg.server.app:app",
            (
                "--taskset.task.user.provider-kwargs.app pkg.server.app:app",
                "--env.taskset.provider-kwargs.app pkg.server.app:app",
                "--app pkg.server.app:app",
            ),
        ),
        (
            "server_web_ui",
            True,
            (
                "--taskset.task.user.server-web-ui true",
                "--env.taskset.server-web-ui true",
                "--web-ui",  # a switch: check's flag takes no value
            ),
        ),
        (
            "launch_timeout_s",
            300,
            (
                "--taskset.task.user.launch-timeout-s 300",
                "--env.taskset.launch-timeout-s 300",
                "--launch-timeout 300",
            ),
        ),
    ],
)
def test_a_setting_named_with_its_value_is_rendered_as_the_flag_given_it(
    name, value, spelled
):
    token = setting(name, value)
    assert token == f"`{name} = {json.dumps(value)}`"  # unrendered: as in a TOML
    assert named_settings(f"set {token} to skip it") == (name,)
    for surface, expected in zip(SURFACES, spelled, strict=True):
        assert render_settings(f"set {token} to", surface) == f"set `{expected}` to"
    # check's rendering, typed as it stands, sets that value.
    args = vars(build_parser().parse_args(["check", "x/y", *shlex.split(spelled[2])]))
    dest = spelled[2].split()[0].removeprefix("--").replace("-", "_")
    expected = {name.partition(".")[2]: value} if dest == "provider_kwargs" else value
    assert args[dest] == expected


def test_a_name_the_core_does_not_have_is_refused_where_it_is_written():
    with pytest.raises(ValueError, match="'launch_timeout' is not a setting"):
        setting("launch_timeout")
    with pytest.raises(ValueError, match="not a setting"):
        setting("provider_kwargs.App")


def test_the_settings_a_failure_names_survive_its_text_travelling_as_it_is():
    """A shared server's failure reaches a 0.2 simulator as text (the pool's HTTP
    endpoint): the text alone names the settings, and renders."""
    failure = EnvFailure(
        no_app_message(
            None, [(AppChoice("server.app:app", "openenv.yaml"), "ImportError")], ""
        )
    )
    assert failure.settings == ("provider_kwargs.app",)
    travelled = json.loads(json.dumps({"error": str(failure)}))["error"]
    assert named_settings(travelled) == ("provider_kwargs.app",)
    assert "set `--app` to the module that calls `create_app`" in render_settings(
        travelled, CHECK_FLAGS
    )
    # Unrendered, it names the setting as it is called; other backticks are kept.
    assert "set `provider_kwargs.app` to the module that calls `create_app`" in str(
        failure
    )


def test_a_launched_servers_own_output_is_rendered_too():
    """The stand-in gradio runs in the env server, without openenv_v1, and writes the
    token itself: what it raises there reaches the user rendered (in a failure's
    output tail)."""
    stand_in = Path(NO_GRADIO_DIR) / "gradio" / "__init__.py"
    with pytest.raises(ModuleNotFoundError) as info:
        exec(compile(stand_in.read_text(), str(stand_in), "exec"), {})
    assert GRADIO_REFUSED in str(info.value)
    assert named_settings(str(info.value)) == ("server_web_ui",)
    assert render_settings(str(info.value), VF_EVAL_FLAGS).endswith(
        "turn on `--env.taskset.server-web-ui`"
    )


def test_checks_report_names_checks_flags_and_no_hint_restates_them():
    report = CheckReport(target={"env": "local/x"})
    report.stage = "launch"
    report.fail(
        str(
            EnvFailure(
                f"env server was not ready within 5s (raise "
                f"{setting('launch_timeout_s')} if it is just slow)"
            )
        )
    )
    assert report.failure is not None
    assert "(raise `--launch-timeout` if it is just slow)" in report.failure.error
    assert report.failure.hint is None
    assert render_settings(GRADIO_NEEDED, CHECK_FLAGS).endswith(
        "turn on `--web-ui` to skip the first try"
    )


def test_every_setting_a_message_can_name_has_a_spelling_on_every_surface():
    assert set(SPELLINGS) - {n for n in SPELLINGS if "." in n} == SETTINGS


def rendered(text: str) -> tuple[str, str, str]:
    """`text` as each surface shows it, in the order of `SURFACES`."""
    vf02, vf04, check = (render_settings(text, surface) for surface in SURFACES)
    return vf02, vf04, check


def test_a_cloud_sandbox_without_an_image_names_the_key_on_each_surface():
    with pytest.raises(EnvFailure) as info:
        cloud_launch_plan(EnvTarget(env="o/e", provider="modal"))
    assert info.value.settings == ("provider_kwargs.image",)
    vf02, vf04, check = rendered(str(info.value))
    assert "needs `--taskset.task.user.provider-kwargs.image`: " in vf02
    assert "needs `--env.taskset.provider-kwargs.image`: " in vf04
    assert "needs `--provider-kwargs '{\"image\": ...}'`: " in check


def test_a_swarm_publish_without_egress_names_both_fixes_on_each_surface():
    target = EnvTarget(
        env="local/x",
        provider="swarm",
        provider_kwargs={"publish": "ingress", "egress": False},
    )
    with pytest.raises(EnvFailure) as info:
        SwarmService(
            env="local/x",
            options=swarm_options(target),
            launch_timeout_s=5,
            secret_env={},
        )
    assert info.value.settings == ("provider_kwargs.publish", "provider_kwargs.egress")
    vf02, vf04, check = rendered(str(info.value))
    assert vf02.startswith(
        "`--taskset.task.user.provider-kwargs.publish ingress` publishes through"
    )
    assert vf02.endswith(
        "drop `--taskset.task.user.provider-kwargs.egress false`, or set "
        "`--taskset.task.user.provider-kwargs.publish local` (nothing published, "
        "no egress)"
    )
    assert "drop `--env.taskset.provider-kwargs.egress false`, or set " in vf04
    assert check.endswith(
        "drop `--provider-kwargs '{\"egress\": false}'`, or set "
        '`--provider-kwargs \'{"publish": "local"}\'` (nothing published, no egress)'
    )


async def test_a_target_without_an_env_names_both_ways_on_each_surface():
    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(EnvFailure) as info:
            await open_env(EnvTarget(), stack)
    assert info.value.settings == ("env", "base_url")
    vf02, vf04, check = rendered(str(info.value))
    assert vf02.endswith("set `--taskset.env` (an OpenEnv id) or `--taskset.base-url`")
    assert vf04.endswith(
        "set `--env.taskset.env` (an OpenEnv id) or `--env.taskset.base-url`"
    )
    assert check.endswith("set `env` (an OpenEnv id) or `--base-url`")


def test_a_launch_with_a_base_url_is_refused_naming_each_surfaces_flags(capsys):
    """`EnvSettings` renders with its line's surface (`OpenEnvConfig.surface`);
    `check` builds it bare and renders the tokens itself (0.4: the vf04 suite)."""
    with pytest.raises(ValidationError) as info:
        OpenEnvConfig(base_url="http://127.0.0.1:9", provider="modal")
    assert "drop `--taskset.provider`, or drop `--taskset.base-url`" in str(info.value)
    with pytest.raises(SystemExit):
        main(["check", "--base-url", "http://127.0.0.1:9", "--use-docker"])
    assert capsys.readouterr().err.endswith(
        "use_docker launches a server, but base_url connects to a running one: "
        "drop `--use-docker`, or drop `--base-url`\n"
    )
