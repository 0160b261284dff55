"""The verifiers 0.2 user simulator starts without the packages it never uses
(`openenv_v1.vf02.simulator.light_verifiers`), still plays, and fails loudly if one is used.

The end-to-end evals (tests/test_eval.py, test_native.py, test_image_evals.py, the
`eval --server` one) all run through this lightened simulator as well."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from benchmarks.simulator_start import start_simulator
from openenv_v1.vf02.simulator.light_verifiers import FULL_IMPORT_VAR


def test_the_simulator_starts_without_unused_packages_and_still_plays(wordle_url):
    start = start_simulator(wordle_url, mode="light")
    # A real simulator, started as verifiers does: verifiers' own client gets the
    # Wordle opening from it.
    assert "wordle" in start.opening.lower(), start.opening
    # Resident once ready: ~120 MB; with everything imported (FULL_IMPORT_VAR=1,
    # `benchmarks/simulator_start.py`) ~205 MB, anthropic and sympy being most of it.
    assert start.rss_mb < 170, start


def run_isolated(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter (hiding a package cannot be undone)."""
    environ = {k: v for k, v in os.environ.items() if k != FULL_IMPORT_VAR}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_hidden_package_fails_loudly_when_it_is_used():
    done = run_isolated(
        """
        import sys
        from openenv_v1.vf02.simulator.light_verifiers import (
            UnusedModuleError, hide_unused_modules, is_placeholder,
        )

        assert hide_unused_modules() == ["anthropic", "math_verify", "fastmcp"]
        import verifiers.v1 as vf
        import anthropic
        from verifiers.v1.scoring import verify_boxed_math_answer

        assert is_placeholder(anthropic) and is_placeholder(anthropic.AsyncAnthropic)
        assert "sympy" not in sys.modules and "latex2sympy2_extended" not in sys.modules
        # Naming works: isinstance is simply false, `except` never matches.
        assert not isinstance(object(), anthropic.AsyncAnthropic)
        try:
            anthropic.AsyncAnthropic(api_key="x")
        except UnusedModuleError as e:
            print("CALL:", e)
        # verifiers' math scorer falls back to 0.0 on any Exception: this is not one.
        try:
            verify_boxed_math_answer("\\\\boxed{1}", "1")
        except UnusedModuleError as e:
            print("SCORER:", e)
        try:
            anthropic.types.Message.model_validate({})
        except AttributeError as e:
            print("ATTRIBUTE:", e)
        """
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(": ", 1) for line in done.stdout.splitlines())
    assert lines["CALL"].startswith("anthropic.AsyncAnthropic was used in openenv-v1's")
    assert f"Set {FULL_IMPORT_VAR}=1" in lines["CALL"]
    assert lines["SCORER"].startswith("math_verify.parse was used")
    assert lines["ATTRIBUTE"].startswith("anthropic.types.Message.model_validate: ")


def test_full_import_turns_the_cut_off():
    done = run_isolated(
        """
        from openenv_v1.vf02.simulator.light_verifiers import hide_unused_modules, is_placeholder

        assert hide_unused_modules() == []
        import anthropic
        assert not is_placeholder(anthropic)
        print(anthropic.__version__)
        """,
        **{FULL_IMPORT_VAR: "1"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()[0].isdigit()
