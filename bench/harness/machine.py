"""What the machine and its processes are doing: CPU time of a process (/proc/<pid>/stat),
per-CPU busy, iowait and steal shares (/proc/stat), CPU shares of a set of processes and of
all others over a window, a process's RSS and open files, and what a report says of the
machine."""

from __future__ import annotations

import os
import platform
import time
from typing import Any


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads), in seconds, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    fields = raw[raw.rindex(b")") + 2 :].split()
    # After "pid (comm) " the fields start at field 3 (state); utime is 14, stime 15.
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def cpu_times() -> dict[str, list[int]]:
    """Per-CPU jiffies from /proc/stat: user nice system idle iowait irq softirq steal."""
    out: dict[str, list[int]] = {}
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"cpu") and line[3:4].isdigit():
                name, *values = line.split()
                out[name.decode()] = [int(v) for v in values[:8]]
    return out


def cpu_shares(
    before: dict[str, list[int]], after: dict[str, list[int]]
) -> dict[str, dict[str, float]]:
    """For each CPU, the share of the interval spent busy, in iowait and stolen by the host."""
    shares: dict[str, dict[str, float]] = {}
    for name, b in before.items():
        a = after.get(name)
        if a is None:
            continue
        d = [x - y for x, y in zip(a, b, strict=True)]
        total = sum(d)
        if total <= 0:
            continue
        idle, iowait, steal = d[3], d[4], d[7]
        shares[name] = {
            "busy": round((total - idle - iowait - steal) / total, 3),
            "iowait": round(iowait / total, 3),
            "steal": round(steal / total, 3),
        }
    return shares


class CpuMeter:
    """CPU use of some processes, of this one ("bench": the load generator and the live
    sockets) and of all others ("others": the machine's busy time not theirs), from its
    creation to `shares()`, as a share of one CPU."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.start = self._read()
        self.machine0 = cpu_times()

    @property
    def started(self) -> float:
        """When the window began (perf_counter seconds)."""
        return self.start[0]

    def _read(self) -> tuple[float, dict[str, float]]:
        seconds = {name: proc_cpu_seconds(pid) for name, pid in self.pids.items()}
        return time.perf_counter(), seconds | {"bench": time.process_time()}

    def shares(self) -> dict[str, float]:
        (t0, before), (t1, after) = self.start, self._read()
        ours = {name: (after[name] - before[name]) / (t1 - t0) for name in after}
        busy = sum(cpu["busy"] for cpu in self.machine().values())
        return {name: round(v, 3) for name, v in ours.items()} | {
            "others": round(max(0.0, busy - sum(ours.values())), 3)
        }

    def machine(self) -> dict[str, dict[str, float]]:
        """Per CPU: busy, iowait and steal shares since the start."""
        return cpu_shares(self.machine0, cpu_times())


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def open_files(pid: int) -> tuple[int, int]:
    """(descriptors open now, the soft limit) of a process."""
    soft = 0
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft = int(line.split()[3])
    return len(os.listdir(f"/proc/{pid}/fd")), soft


def machine_info(loadavg_before: tuple[float, float, float]) -> dict[str, Any]:
    """What a report says of the machine it ran on."""
    return {
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "loadavg_before": loadavg_before,
        "loadavg_after": os.getloadavg(),
    }
