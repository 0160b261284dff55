"""What one episode does against a connected OpenEnv client.

    env_episode.py  EnvEpisode, open_episode: reset, one step per model reply, the
                    reward, done, invalid-action bounds
    schema.py       ActionSpec: the live action schema and, for MCP envs, the tools
    replies.py      a model reply read: its final answer, the JSON objects in it
    actions.py      parse_action: a reply -> an action dict, or InvalidAction
    step_errors.py  whose fault a refused step is: the model's or the env's
    frames.py       a reset or step frame validated into an observation
    render.py       observations, the action format and feedback as model text
    images.py       pixel fields found, bounded and encoded as PNG
    turns.py        Turn: an observation as bounded text plus its images
    mcp_route.py    an MCP env's tools listed and called by steps or JSON-RPC

May import `openenv_v1.core`'s shared modules and OpenEnv; from
`openenv_v1.core.launch` only the one call that opens an episode's client
(`env_episode.open_episode` -> `launch.target.open_env`). Never verifiers.
"""
