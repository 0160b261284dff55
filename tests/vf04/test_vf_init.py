"""verifiers 0.4: the package `openenv-v1 init` writes for the local Wordle env passes
its own tests on this line too (`vf-eval my-wordle-v1`), from the same source as on
0.2 (tests/test_init.py)."""

import pytest

from tests.test_init import init_and_run_its_tests


@pytest.mark.long
def test_init_writes_a_package_whose_own_tests_pass_on_vf04(tmp_path):
    init_and_run_its_tests(tmp_path)
