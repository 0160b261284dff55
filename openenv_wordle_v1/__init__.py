"""Wordle (`openenv/wordle`) as a verifiers taskset, for the installed verifiers
line: `vf02.py` (verifiers 0.2, `eval openenv-wordle-v1`) or `vf04.py` (verifiers
0.4, `vf-eval openenv-wordle-v1`)."""

from openenv_v1 import verifiers_line

if verifiers_line() == "vf04":
    from openenv_wordle_v1.vf04 import *  # noqa: F403
    from openenv_wordle_v1.vf04 import WORDLE_APP, __all__
else:
    from openenv_wordle_v1.vf02 import *  # noqa: F403
    from openenv_wordle_v1.vf02 import WORDLE_APP, __all__  # noqa: F401
