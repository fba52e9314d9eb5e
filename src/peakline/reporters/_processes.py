"""The per-worker breakdown of a merged profile, shared by the terminal and HTML reports.

A distributed job's processes (torch.distributed ranks, pool or cluster workers) are listed
with the host they ran on; for ranks, the report names the slowest one and the one with the
largest peak. "Slowest" is the rank with the most CPU time: ranks meet at collectives, so
the others spend the difference waiting for it and their elapsed times come out alike.
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
