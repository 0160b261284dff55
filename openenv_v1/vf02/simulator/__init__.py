"""The verifiers 0.2 user simulator's process machinery, apart from the binding.

verifiers 0.2 runs a user simulator process per rollout; these make that cheap and
bounded:

    forks.py            each simulator a fork of one that has imported everything
    prefork.py          that fork server forked from the eval, ahead, while it has one thread
    slots.py            how many simulators run at once (the rest wait)
    light_verifiers.py  a simulator started without the parts of verifiers it never runs
    mcp_clients.py      the eval process's MCP clients sharing one TLS context

Imports nothing itself. These modules name the binding's user module only where they
start one (`forks.py`); the binding imports them, not the other way round.
"""
