"""CPU throttling of this process's cgroup (a container's CPU quota), read from the CPU
controller's ``cpu.stat``: cgroup v2 ``throttled_usec`` / ``nr_throttled``, cgroup v1
``throttled_time`` (ns) / ``nr_throttled``. The figures are the whole cgroup's, counted since
it was created; the session keeps the difference over the run (``totals.cgroup_throttled_s``).

Only ``open``/``read``: this runs on the start path of every profiled program."""

from __future__ import annotations

_ROOT = "/sys/fs/cgroup"


def _stat_paths() -> list[str]:
    """Candidate cpu.stat files of this process's cgroup, most specific first."""
    try:
        with open("/proc/self/cgroup", encoding="ascii", errors="replace") as f:
            entries = f.read().splitlines()
    except OSError:
        return []
    paths = []
    for entry in entries:  # "hierarchy-id:controllers:path"
        parts = entry.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        path = path.rstrip("/")
        if controllers == "":  # cgroup v2 (unified)
            paths += [f"{_ROOT}{path}/cpu.stat", f"{_ROOT}/unified{path}/cpu.stat"]
        elif "cpu" in controllers.split(","):
            directory = ",".join(c for c in controllers.split(",") if c.startswith("cpu"))
            paths += [f"{_ROOT}/{directory}{path}/cpu.stat", f"{_ROOT}/cpu{path}/cpu.stat"]
    return list(dict.fromkeys(paths))  # a v2 cpu.stat without a CPU controller has no
    # throttling fields: the reader moves on to the next candidate


def throttling() -> tuple[int, int] | None:
    """(throttled ns, throttled periods) of this process's cgroup so far, or None when no
    CPU controller's statistics are readable (or it has never had a quota to throttle by)."""
    for path in _stat_paths():
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        fields = {}
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                fields[key] = int(value)
        if "throttled_usec" in fields:
            return fields["throttled_usec"] * 1000, fields.get("nr_throttled", 0)
        if "throttled_time" in fields:
            return fields["throttled_time"], fields.get("nr_throttled", 0)
    return None


def difference(start: tuple[int, int] | None,
               end: tuple[int, int] | None) -> tuple[float, int] | None:
    """(seconds, periods) throttled between two readings, or None if either is missing."""
    if start is None or end is None:
        return None
    return max(0, end[0] - start[0]) / 1e9, max(0, end[1] - start[1])
