"""What one episode does against a connected OpenEnv client.

    env_episode.py     EnvEpisode, open_episode: reset, one step per model reply, the
                       bounds on invalid actions and on time
    report.py          EpisodeLimits and EpisodeReport: an episode's bounds, and its
                       running account (reward, steps, invalid actions, stop reason)
    env_source.py      what the env's local source says: where it is, the kwargs its
                       reset takes
    schema.py          ActionSpec: the live action schema and, for MCP envs, the tools
    schema_check.py    a served schema checked before use (depth, refs, validity)
    schema_example.py  an example action built from a schema, for format hints
    replies.py         a model reply read: its final answer, the JSON objects in it
    actions.py         parse_action: a reply -> an action dict, or InvalidAction
    step_errors.py     whose fault a refused step is: the model's or the env's
    frames.py          a reset or step frame validated into an observation
    view.py            what an observation shows the model (fields, MCP results)
    render.py          observations as model text (text or JSON format)
    action_format.py   how to act, as the model is told; feedback after a miss
    images.py          pixel fields found, bounded and encoded as PNG
    turns.py           Turn: an observation as bounded text plus its images
    mcp_route.py       an MCP env's tools listed and called by steps or JSON-RPC

May import `openenv_v1.core`'s shared modules and OpenEnv; from
`openenv_v1.core.launch` only the one call that opens an episode's client
(`env_episode.open_episode` -> `launch.target.open_env`; `EnvTarget` as a type). Never
verifiers. `tests/test_layout.py` holds it to that, and to no circle of imports.
"""
