"""docs/configuration.md is generated from the config classes' field docstrings by
docs/gen_config.py; these tests fail when it is out of date or misses a setting."""

import importlib.util
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "uv run python docs/gen_config.py"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_config", ROOT / "docs" / "gen_config.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_config"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


gen_config = _generator()


def test_configuration_md_is_current(tmp_path):
    fresh = tmp_path / "configuration.md"
    gen_config.main(["--output", str(fresh)])
    committed = ROOT / "docs" / "configuration.md"
    assert committed.read_text() == fresh.read_text(), (
        "docs/configuration.md is out of date with the config docstrings: run "
        f"`{REGENERATE}` and commit the result"
    )


def _documented(source: str, cls: str) -> set[str]:
    (section,) = (s for s in gen_config.SECTIONS if s.source == source and s.cls == cls)
    names = {s.name for s in gen_config.read_settings(ROOT / source, cls)}
    return names - section.skip


def _own_fields(model: type, *bases: type) -> set[str]:
    inherited = {name for base in bases for name in base.model_fields}
    return set(model.model_fields) - inherited


def test_the_source_reader_finds_every_field_pydantic_finds():
    """The generator reads source, not classes: check it against the classes this
    environment can import (the installed verifiers line)."""
    from openenv_v1.settings import EnvSettings, EpisodeSettings, TaskSettings

    assert _documented("openenv_v1/settings.py", "EnvSettings") == set(
        EnvSettings.model_fields
    )
    assert _documented("openenv_v1/settings.py", "EpisodeSettings") == set(
        EpisodeSettings.model_fields
    )
    assert _documented("openenv_v1/settings.py", "TaskSettings") == set(
        TaskSettings.model_fields
    )
    import verifiers.v1 as vf

    if version("verifiers").startswith("0.2."):
        from openenv_v1.vf02 import config

        assert _documented("openenv_v1/vf02/config.py", "OpenEnvConfig") == (
            _own_fields(
                config.OpenEnvConfig, EnvSettings, TaskSettings, vf.TasksetConfig
            )
            - {"task"}
        )
        assert _documented("openenv_v1/vf02/config.py", "OpenEnvUserConfig") == (
            _own_fields(config.OpenEnvUserConfig, EpisodeSettings, vf.UserConfig)
        )
    elif version("verifiers").startswith("0.4."):
        from openenv_v1.vf04 import config

        # Every setting of the 0.4 taskset is a shared one, documented above.
        assert not _own_fields(
            config.OpenEnvConfig,
            EnvSettings,
            EpisodeSettings,
            TaskSettings,
            vf.TasksetConfig,
        )
        assert _documented("openenv_v1/vf04/config.py", "OpenEnvEnvConfig") == (
            _own_fields(config.OpenEnvEnvConfig, vf.EnvConfig)
        )
    else:
        pytest.fail(f"unknown verifiers line {version('verifiers')}")


def test_a_setting_without_a_docstring_is_an_error_naming_it(tmp_path):
    source = tmp_path / "config.py"
    source.write_text(
        "class C:\n"
        "    documented: int = 1\n"
        '    """Has one."""\n'
        "    bare: bool = False\n"
    )
    with pytest.raises(SystemExit, match=r"config.py:4 C\.bare has no docstring"):
        gen_config.read_settings(source, "C")
