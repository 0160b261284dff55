"""A way in to a Swarm task that publishes nothing: a gateway container on loopback.

Swarm publishes a port on every interface of a node or of every node, and a task on
an internal overlay network gets none. So with `publish = "local"` each task the pool
uses is reached through a gateway: a small container of the service's image (OpenEnv
images have `python3`), hardened and labelled for the reaper, its port published on
127.0.0.1 only and attached to the service's network, piping each TCP connection to
the task's address there.

    gateway = Gateway.start(image, network, "10.0.1.2", 8000, env="org/maze")
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from openenv_v1.core.errors import EnvFailure
from openenv_v1.core.launch.docker.cli import docker_cli, docker_port, run_docker
from openenv_v1.core.launch.docker.reaper import label_args
from openenv_v1.core.setting_names import setting

GATEWAY_PORT = 8000
# The forwarder: each connection to port argv[3] is piped to argv[1]:argv[2].
FORWARDER = """
import asyncio, sys
TARGET, PORT = sys.argv[1], int(sys.argv[2])
async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()
async def serve(reader, writer):
    try:
        target_reader, target_writer = await asyncio.open_connection(TARGET, PORT)
    except OSError:
        writer.close()
        return
    await asyncio.gather(pipe(reader, target_writer), pipe(target_reader, writer))
async def main():
    server = await asyncio.start_server(serve, "0.0.0.0", int(sys.argv[3]))
    await server.serve_forever()
asyncio.run(main())
"""


@dataclass
class Gateway:
    container: str
    url: str
    published: str
    """`127.0.0.1:<port>` as `docker port` reports it."""

    @classmethod
    def start(
        cls, image: str, network: str, address: str, port: int, *, env: str
    ) -> Gateway:
        """Start a gateway to `address:port` on `network`; `EnvFailure` naming the
        cause when it cannot (it is removed again)."""
        name = f"openenv-v1-gateway-{secrets.token_hex(4)}"
        argv = ["run", "-d", "--name", name, "-p", f"127.0.0.1::{GATEWAY_PORT}"]
        argv += label_args(docker_cli(), env)
        argv += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
        argv += ["--user", "65534:65534", "--read-only", "--memory", "128m"]
        argv += ["--pids-limit", "64", "--entrypoint", "python3"]
        argv += [image, "-c", FORWARDER, address, str(port), str(GATEWAY_PORT)]
        result = run_docker(*argv, timeout=120)
        if result.returncode != 0:
            run_docker("rm", "-f", name, timeout=60)
            raise EnvFailure(
                f"cannot start the loopback gateway to Swarm task {address} (it runs "
                f"python3 from {image}): {(result.stderr or result.stdout).strip()} "
                f"(or set {setting('provider_kwargs.publish', 'host')} to publish the "
                "tasks)"
            )
        container = result.stdout.strip()
        gateway = cls(container, "", "")
        try:
            connected = run_docker("network", "connect", network, container)
            if connected.returncode != 0:
                raise EnvFailure(
                    f"cannot attach the loopback gateway to network {network}: "
                    f"{(connected.stderr or connected.stdout).strip()}"
                )
            published, bound = docker_port(container, GATEWAY_PORT)
            if bound.returncode != 0 or published is None:
                raise EnvFailure(
                    f"the loopback gateway to {address} publishes no port: "
                    f"{(bound.stderr or bound.stdout).strip()}"
                )
        except BaseException:
            gateway.stop()
            raise
        gateway.published = published
        gateway.url = f"http://127.0.0.1:{gateway.published.rpartition(':')[2]}"
        return gateway

    def running(self) -> bool:
        result = run_docker("inspect", "--format", "{{.State.Running}}", self.container)
        return result.stdout.strip() == "true"

    def stop(self) -> None:
        run_docker("rm", "-f", self.container, timeout=60)
