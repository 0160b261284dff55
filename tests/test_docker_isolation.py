"""Containers are hardened by default, shown from inside on the real engine.

Model-written code runs in `tests/envs/docker/code_env` (each step runs the Python it
is sent), so a step is a probe from inside the container: what it reaches (the cloud
metadata address, another env container, an address on the internet: one TCP
connection attempt each, short timeout), which capabilities and uid it has, and what
it may write. The same episodes show the server still serves: the isolated container
at its address on the internal network, the one with egress on its published
loopback port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket

import pytest

from openenv_v1.core import EnvFailure, EnvTarget, open_env
from openenv_v1.core.launch.docker.container import DockerLaunch
from openenv_v1.core.launch.docker.image import ensure_env_image
from openenv_v1.core.launch.docker.network import EGRESS, ISOLATED
from openenv_v1.core.launch.docker.options import DockerOptions
from openenv_v1.core.launch.docker.reaper import OWNER_LABEL, owner_token
from tests.real_docker import CODE_ENV, docker_json, labelled, remove_labelled

ENV = "test/code_env"
METADATA = "169.254.169.254"
BASE = "ghcr.io/meta-pytorch/openenv-base:latest"

PROBE = """
import json, os, socket
def reach(host, port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        return "reached"
    except OSError as e:
        return type(e).__name__
    finally:
        s.close()
def writable(path):
    try:
        with open(os.path.join(path, "probe"), "w") as f:
            f.write("x")
        return True
    except OSError:
        return False
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
print(json.dumps({
    "uid": os.getuid(),
    "cap_eff": status["CapEff"].strip(),
    "cap_bnd": status["CapBnd"].strip(),
    "no_new_privs": status["NoNewPrivs"].strip(),
    "metadata": reach(%(metadata)r, 80),
    "neighbour": reach(%(neighbour)r, 8000),
    "internet": reach(%(internet)r, 443),
    "var_tmp": writable("/var/tmp"),
    "tmp": writable("/tmp"),
    "app": writable("/app/env"),
}))
"""


def internet_address() -> tuple[str, bool]:
    """An address on the internet (this host's package registry, else a public
    resolver) and whether this host itself reaches it (one attempt)."""
    try:
        address = socket.getaddrinfo("pypi.org", 443, socket.AF_INET)[0][4][0]
    except OSError:
        address = "1.1.1.1"
    with socket.socket() as s:
        s.settimeout(3)
        try:
            s.connect((address, 443))
            return address, True
        except OSError:
            return address, False


def code_target(**kwargs) -> EnvTarget:
    return EnvTarget(
        env=ENV,
        use_docker=True,
        provider_kwargs={"project_path": str(CODE_ENV), **kwargs},
        launch_timeout_s=180,
    )


@pytest.fixture
def mine(real_docker):
    label = f"{OWNER_LABEL}={owner_token()}"
    yield label
    remove_labelled(label)


async def probe(client, neighbour: str, internet: str) -> dict:
    await client.reset()
    code = PROBE % {"metadata": METADATA, "neighbour": neighbour, "internet": internet}
    result = await client.step({"code": code})
    assert result.observation["exit_code"] == 0, result.observation
    return json.loads(result.observation["stdout"])


@pytest.mark.long
async def test_model_code_reaches_nothing_has_no_capabilities_and_is_not_root(mine):
    """By default: no metadata address, no other env container, no internet, no
    capabilities, uid 65534 (code_env's image names no user), while the eval's own
    steps reach the server on the internal network. With `egress` the container's
    published 127.0.0.1 port serves, and it gets out (where this host does), but
    still reaches no other container."""
    internet, host_gets_out = internet_address()
    async with contextlib.AsyncExitStack() as stack:
        isolated = await open_env(code_target(read_only=True), stack)
        neighbour = await open_env(code_target(), stack)
        egress = await open_env(code_target(egress=True), stack)
        containers = {
            info["Name"].lstrip("/"): info
            for info in docker_json("inspect", *labelled(mine))
        }
        assert len(containers) == 3
        # Read while the containers hold them: an idle shared network is removed
        # when any eval's reaper exits (another test's, under xdist).
        nets = {
            name: docker_json("network", "inspect", name) for name in (ISOLATED, EGRESS)
        }
        by_url = {}
        for info in containers.values():
            (name, net), *_ = info["NetworkSettings"]["Networks"].items()
            by_url[name, net["IPAddress"]] = info
        neighbour_ip = neighbour.base_url.removeprefix("http://").split(":")[0]
        inside = await probe(isolated, neighbour_ip, internet)
        outside = await probe(egress, neighbour_ip, internet)

    # The isolated container reaches nothing and holds nothing.
    assert inside["metadata"] != "reached", inside
    assert inside["neighbour"] != "reached", inside
    assert inside["internet"] != "reached", inside
    assert inside["uid"] == 65534
    assert int(inside["cap_eff"], 16) == 0 and int(inside["cap_bnd"], 16) == 0
    assert inside["no_new_privs"] == "1"
    # Read-only root: only the tmpfs at /tmp takes writes.
    assert (inside["tmp"], inside["var_tmp"], inside["app"]) == (True, False, False)

    # With egress: out where this host gets out, still no neighbour, no root.
    assert outside["neighbour"] != "reached", outside
    if host_gets_out:
        assert outside["internet"] == "reached", outside
    assert outside["uid"] == 65534 and int(outside["cap_eff"], 16) == 0
    assert outside["var_tmp"] is True  # not read-only unless asked

    # What Docker ran: the isolated ones on the internal network, publishing nothing,
    # reached at their address there; the egress one published on loopback only.
    networks = {}
    for info in containers.values():
        host = info["HostConfig"]
        assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
        assert host["SecurityOpt"] == ["no-new-privileges"]
        assert info["Config"]["User"] == "65534:65534"
        (network,) = info["NetworkSettings"]["Networks"]
        networks.setdefault(network, []).append(info)
    assert sorted(len(v) for v in networks.values()) == [1, 2]
    assert len(networks[ISOLATED]) == 2 and len(networks[EGRESS]) == 1
    for info in networks[ISOLATED]:
        assert info["NetworkSettings"]["Ports"] == {}
        address = info["NetworkSettings"]["Networks"][ISOLATED]["IPAddress"]
        assert f"http://{address}:8000" in (isolated.base_url, neighbour.base_url)
    (egress_info,) = networks[EGRESS]
    (published,) = egress_info["NetworkSettings"]["Ports"]["8000/tcp"]
    assert published["HostIp"] == "127.0.0.1"
    assert egress.base_url == f"http://127.0.0.1:{published['HostPort']}"
    for name, internal in ((ISOLATED, True), (EGRESS, False)):
        (net,) = nets[name]
        assert net["Internal"] is internal
        assert net["Options"]["com.docker.network.bridge.enable_icc"] == "false"
    assert labelled(mine) == []


async def test_an_image_that_needs_root_runs_as_root_saying_so_unless_told_not_to(
    mine, tmp_path, caplog
):
    """`user` "auto" runs an image without a user of its own as uid 65534; one whose
    server then exits before it is ready runs again as root (still without
    capabilities), with a warning naming the image. A user given explicitly is
    never changed: the launch fails, naming the setting."""
    folder = tmp_path / "root_only_env"
    folder.mkdir()
    (folder / "Dockerfile").write_text(
        f"FROM {BASE}\n"
        "RUN mkdir -p /srv && echo ok > /srv/health\n"
        'CMD ["sh", "-c", "test $(id -u) = 0 || { echo this server needs root; '
        'exit 4; }; cd /srv && exec python3 -m http.server 8000"]\n'
    )
    built = await asyncio.to_thread(ensure_env_image, folder)
    try:
        provider = DockerLaunch(
            env="test/root_only", options=DockerOptions(image=built.image)
        )
        with caplog.at_level(
            logging.WARNING, "openenv_v1.core.launch.docker.container"
        ):
            try:
                provider.start()
                url = provider.wait_for_ready()
                (info,) = docker_json("inspect", provider.container_id or "")
            finally:
                provider.stop(grace_s=0)
        assert url.startswith("http://") and provider.user == "root"
        assert info["Config"]["User"] == "" and info["HostConfig"]["CapDrop"] == ["ALL"]
        (warning,) = [
            r.getMessage() for r in caplog.records if "needs root" in r.message
        ]
        assert f"image {built.image} needs root" in warning
        assert "this server needs root" in warning

        strict = DockerLaunch(
            env="test/root_only",
            options=DockerOptions(image=built.image, user="65534:65534"),
        )
        try:
            with pytest.raises(EnvFailure) as failed:  # in start() or in the wait
                strict.start()
                strict.wait_for_ready()
        finally:
            strict.stop(grace_s=0)
        message = str(failed.value)
        assert "exited with code 4 before it was ready" in message
        assert "it ran as user 65534:65534: if the image needs root, set " in message
        assert 'provider_kwargs.user = "root"' in message
        assert labelled(mine) == []
    finally:
        from tests.test_docker_build import remove_images

        remove_images("openenv-v1/root_only_env")


def test_a_network_set_by_hand_or_a_port_on_the_isolated_network_names_the_option():
    """The network is `egress` or `network`, never a `docker_run_args` flag; a host
    `port` needs a published port, which the isolated network has not. Both fail
    before anything runs."""
    for args in (["--network", "host"], ["--net=bridge"]):
        launch = DockerLaunch(env=ENV, options=DockerOptions(docker_run_args=args))
        with pytest.raises(EnvFailure, match="use `provider_kwargs.network`"):
            launch.start_container("any/image")
    launch = DockerLaunch(env=ENV, options=DockerOptions(port=8123))
    with pytest.raises(EnvFailure, match="set `provider_kwargs.egress = true`"):
        launch.start_container("any/image")
    assert launch.container is None
