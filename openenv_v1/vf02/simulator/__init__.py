"""The verifiers 0.2 user simulator's process machinery, apart from the binding.

verifiers 0.2 runs a user simulator process per rollout; these make that cheap and
bounded:

    forks.py            the eval's fork server (each simulator a fork of one that has
                        imported everything), and what its processes share
    launcher.py         the process verifiers starts: asks for a fork, relays its end
    fork_server.py      the fork server's process: imports once, forks on request
    forked.py           a fork: runs the launcher's simulator
    slots.py            how many simulators run at once (the rest wait)
    light_verifiers.py  a simulator started without the parts of verifiers it never runs
    serving.py          its MCP server's turns without Nagle's wait or per-request logs
    mcp_clients.py      the eval process's MCP clients sharing one TLS context

Imports nothing itself. These modules name the binding's user module only where they
start one (`forks.SIMULATOR_MODULE`); the binding imports them, not the other way round.
"""
