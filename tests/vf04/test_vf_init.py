"""verifiers 0.4: the packages `openenv-v1 init` writes for the local Wordle env (its
own tasks, a real guess) and for an env whose reset takes a seed (16 seeded tasks)
pass their own tests on this line too (`vf-eval NAME`), from the same source as on
0.2 (tests/test_init.py)."""

import pytest

from tests.test_init import init_a_seeded_env_and_run_its_tests, init_and_run_its_tests


@pytest.mark.long
def test_init_writes_a_package_whose_own_tests_pass_on_vf04(tmp_path):
    init_and_run_its_tests(tmp_path)


@pytest.mark.long
def test_a_seeded_envs_package_passes_its_own_tests_on_vf04(tmp_path):
    init_a_seeded_env_and_run_its_tests(tmp_path)
