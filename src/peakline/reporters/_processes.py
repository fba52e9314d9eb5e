"""The per-worker breakdown of a merged profile, shared by the terminal and HTML reports.

A distributed job's processes (torch.distributed ranks, pool or cluster workers) are listed
with the host they ran on; for ranks, the report names the slowest one and the one with the
largest peak. "Slowest" is the rank with the most CPU time: ranks meet at collectives, so
the others spend the difference waiting for it and their elapsed times come out alike.
Tasks of a task engine (Dask) are summed per key prefix (the profile's ``task_keys``), and
ranks' lines are shown rank by rank (``rank_lines``).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from peakline.model.profile import Profile, ProcessRecord


def label(record: ProcessRecord) -> str:
    """'rank 1 (pid 4242)' for a rank, 'pid 4242' otherwise."""
    return f"rank {record.rank} (pid {record.pid})" if record.rank is not None \
        else f"pid {record.pid}"


def describe(record: ProcessRecord) -> str:
    """What the process ran: a Ray worker by its worker id, actor class and task functions
    ('Ray worker 3a323b93, actor Holder, tasks Holder.__init__, Holder.pid'); any other by its
    command line."""
    if record.ray_worker_id:
        text = f"Ray worker {record.ray_worker_id[:8]}"
        if record.ray_actor:
            text += f", actor {record.ray_actor}"
        if record.ray_tasks:
            text += ", tasks " + ", ".join(record.ray_tasks)
        return text
    return " ".join(record.argv) or record.program or "?"


def rank_highlights(profile: Profile) -> list[tuple[str, ProcessRecord, str]]:
    """[(what, process, figure)]: the slowest rank and the rank with the largest peak, when
    at least two ranks were merged; empty otherwise."""
    from peakline.reporters._format import human_bytes

    ranks = [r for r in profile.processes or () if r.merged and r.rank is not None]
    if len(ranks) < 2:
        return []
    out = []
    slowest = max(ranks, key=lambda r: (r.cpu_s or 0.0, -r.rank))
    out.append(("slowest rank", slowest, f"{slowest.cpu_s or 0.0:.2f} s CPU"))
    peaks = [r for r in ranks if r.peak_bytes is not None]
    if peaks:
        largest = max(peaks, key=lambda r: (r.peak_bytes, -r.rank))
        out.append(("largest peak", largest, human_bytes(largest.peak_bytes)))
    return out


TASK_KEYS_TITLE = "Tasks by key prefix: CPU and heap while they ran"


def task_key_parts(profile: Profile) -> list[list[str]]:
    """One row of parts per key prefix (the profile's order: most CPU first)."""
    from peakline.reporters._format import human_bytes
    from peakline.reporters._text import duration, printable

    rows = []
    for r in profile.task_keys or ():
        parts = [printable(r.prefix),
                 f"{r.tasks} task{'s' if r.tasks != 1 else ''} in {r.processes} "
                 f"process{'es' if r.processes != 1 else ''}",
                 f"CPU {duration(r.cpu_s)}", f"wall {duration(r.wall_s)}"]
        if r.rise_bytes is not None:
            parts.append(f"largest rise in a task {human_bytes(r.rise_bytes)}")
        if r.peak_bytes is not None:
            parts.append(f"heap peak while running {human_bytes(r.peak_bytes)}")
        rows.append(parts)
    return rows


RANK_LINES_TITLE = "Lines per rank: each rank's CPU and what the line held at its peak"
RANK_LINES_SHOWN = 10


def rank_line_parts(profile: Profile) -> list[tuple[str, int, list[str]]]:
    """[(file, lineno, parts)]: the lines with the most CPU over the ranks (at most
    ``RANK_LINES_SHOWN``), one part per rank."""
    from peakline.reporters._format import human_bytes
    from peakline.reporters._text import duration

    out = []
    for record in (profile.rank_lines or ())[:RANK_LINES_SHOWN]:
        parts = []
        for r in record.ranks:
            part = f"rank {r.rank} CPU {duration(r.cpu_s) or '0 s'}"
            if r.live_at_peak_bytes:
                part += f" held {human_bytes(r.live_at_peak_bytes)}"
            parts.append(part)
        out.append((record.file, record.lineno, parts))
    return out
