"""An env server as prime-rl hosts one on verifiers 0.4: `serve_env` over ZMQ.

    python -m tests.vf04.env_server ADDRESS CONFIG_JSON [MAX_WORKERS]

CONFIG_JSON is the env config (`{"taskset": {"id": "openenv-v1", ...}}`); with
MAX_WORKERS > 1 a broker serves it from that many spawned worker processes.
"""

import json
import sys

from verifiers.v1.serve import serve_env

if __name__ == "__main__":
    address, config = sys.argv[1], json.loads(sys.argv[2])
    workers = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    serve_env(max_workers=workers, elastic=False, address=address, config_data=config)
