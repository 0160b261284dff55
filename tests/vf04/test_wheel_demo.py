"""The package alone (`tests/wheel_demo.py`): its wheel, installed into fresh
environments outside the repository, names the extras without one and runs
`openenv-v1 demo` with each (`[vf02]` and `[vf04]`, side by side).

It is about both verifiers lines, not this environment's: it runs in the verifiers
0.4 suite only so that CI runs it once, beside that suite's other tests (marked
`long`, it starts first), rather than alone after both suites.
"""

import subprocess
import sys

import pytest

from tests.wheel_demo import ROOT


@pytest.mark.long
def test_the_wheel_alone_names_the_extras_and_runs_the_demo_with_each():
    proc = subprocess.run(
        [sys.executable, "-m", "tests.wheel_demo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(proc.stdout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "wheel_demo: passed" in proc.stdout
