"""Redis deployments for the tests, from the same server binary as the embedded default:
a Sentinel set (a primary, a replica, three sentinels) and a three-primary Redis Cluster,
all on loopback ports, each server with its append-only file on."""

from __future__ import annotations

from pathlib import Path

from redis.crc import key_slot

from bench.support import topology
from bench.support.topology import DATA_ARGS, ServerProcess
from bench.support.topology import wait_for as _wait
from mediator.embedded import default_binary

__all__ = ["DATA_ARGS", "LocalCluster", "SentinelSet", "ServerProcess", "replicas_online"]


def replicas_online(primary: ServerProcess) -> int:
    """How many replicas have finished their first sync with `primary`."""
    info = primary.client().info("replication")
    return sum(
        1
        for k, v in info.items()
        if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online"
    )


class SentinelSet:
    """A primary, `replicas` replicas and three sentinels watching them as `service`; a
    primary that stops answering is failed over within about two seconds."""

    def __init__(self, root: Path, binary: str = "", *, replicas: int = 1) -> None:
        self.root = root
        self.binary = binary or default_binary()
        self.service = "mymaster"
        self.servers = [
            ServerProcess(self.binary, root / f"data-{i}", *DATA_ARGS) for i in range(replicas + 1)
        ]
        self.sentinels: list[ServerProcess] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.service}"

    def start(self) -> SentinelSet:
        primary, *replicas = self.servers
        primary.start()
        for replica in replicas:
            replica.args += ["--replicaof", "127.0.0.1", str(primary.port)]
            replica.start()
        _wait("replicas in sync", lambda: replicas_online(primary) == len(replicas))
        for i in range(3):
            folder = self.root / f"sentinel-{i}"
            folder.mkdir(parents=True, exist_ok=True)
            conf = folder / "sentinel.conf"
            conf.write_text(
                f"sentinel monitor {self.service} 127.0.0.1 {primary.port} 2\n"
                f"sentinel down-after-milliseconds {self.service} 1000\n"
                f"sentinel failover-timeout {self.service} 10000\n"
                f"sentinel parallel-syncs {self.service} 1\n"
            )
            sentinel = ServerProcess(self.binary, folder, str(conf), "--sentinel")
            self.sentinels.append(sentinel.start())
        _wait("sentinels that see each other and the replicas", self._sentinels_ready)
        return self

    def _sentinels_ready(self) -> bool:
        for sentinel in self.sentinels:
            state = sentinel.client().sentinel_master(self.service)
            if int(state["num-other-sentinels"]) < 2 or int(state["num-slaves"]) < 1:
                return False
        return True

    def primary_port(self) -> int:
        address = (
            self.sentinels[0]
            .client()
            .execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
        )
        return int(address[1])

    def primary(self) -> ServerProcess:
        port = self.primary_port()
        return next(s for s in self.servers if s.port == port)

    def kill_primary_and_wait_for_failover(self) -> ServerProcess:
        """SIGKILL the primary; returns the replica the sentinels promoted."""
        old = self.primary()
        old.kill()
        _wait("a failover", lambda: self.primary_port() != old.port, limit_s=30)
        new = self.primary()
        _wait("the new primary", lambda: new.client().info("replication")["role"] == "master")
        return new

    def flushall(self) -> None:
        self.primary().client().flushall()

    def stop(self) -> None:
        for process in [*self.sentinels, *self.servers]:
            process.stop()


class LocalCluster(topology.LocalCluster):
    """The benchmarks' Redis Cluster (bench/support/topology.py) with what the tests do to
    it: flush, kill and restart its primaries, and move a key's slot."""

    def flushall(self) -> None:
        for node in self.nodes:
            node.client().flushall()

    def kill_all(self) -> None:
        for node in self.nodes:
            node.kill()

    def restart(self) -> None:
        """Start the killed nodes again on their ports and files: the cluster re-forms."""
        for node in self.nodes:
            node.start()
        _wait("the cluster to form again", self.formed, limit_s=30)

    def owner(self, key: str) -> ServerProcess:
        """The primary serving `key`'s slot, as the cluster says (CLUSTER SLOTS)."""
        slot = key_slot(key.encode())
        for start, end, primary, *_ in self.nodes[0].client().execute_command("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                return next(n for n in self.nodes if n.port == int(primary[1]))
        raise RuntimeError(f"no primary serves slot {slot}")

    def move_slot_of(self, key: str, to: ServerProcess) -> None:
        """Reshard: move the slot of `key`, with its keys, to the primary `to`, as
        `redis-cli --cluster reshard` does."""
        slot = key_slot(key.encode())
        source = self.owner(key)
        source_id = source.client().execute_command("CLUSTER", "MYID").decode()
        target_id = to.client().execute_command("CLUSTER", "MYID").decode()
        to.client().execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
        source.client().execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
        while keys := source.client().execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
            source.client().execute_command(
                "MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", *keys
            )
        for node in self.nodes:
            node.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
