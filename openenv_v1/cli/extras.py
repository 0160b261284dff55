"""What a command needs from the package's extras (`vf02`, `vf04`: verifiers and an
OpenEnv client, which a bare install lacks), and what to say when it is missing. The
look-up imports nothing, so the answer stays instant.
"""

from __future__ import annotations

import importlib.util

__all__ = ["INSTALL_AN_EXTRA", "missing_extra"]

INSTALL_AN_EXTRA = (
    "install openenv-v1 with the extra of your verifiers line: "
    "`pip install 'openenv-v1[vf02]'` (verifiers 0.2) or "
    "`pip install 'openenv-v1[vf04]'` (verifiers 0.4)"
)

_NEEDS: dict[str, tuple[str, ...]] = {
    # The check plays OpenEnv's client only; the demo runs a verifiers eval too.
    "check": ("openenv",),
    "demo": ("verifiers", "openenv"),
    "init": ("verifiers", "openenv"),
}


def missing_extra(command: str) -> str | None:
    """Why `command` cannot run here for want of an extra, naming the missing
    modules and the extras to install; None when it has what it needs."""
    missing = [
        m for m in _NEEDS.get(command, ()) if importlib.util.find_spec(m) is None
    ]
    if not missing:
        return None
    names = " and ".join(f"`{m}`" for m in missing)
    verb = "is" if len(missing) == 1 else "are"
    return f"{names} {verb} not installed: {INSTALL_AN_EXTRA}"
