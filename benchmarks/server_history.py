"""Validation server benchmark (docs/server.md): does it stay flat as history grows, and how
many pushes per second does it take from 50 clients at once?

    python benchmarks/server_history.py [--runs 100000] [--models 50] [--skip-postgresql]
        [--json OUT.json] [--update-docs]

1. History: synthetic runs are written straight into a fresh database (the server's own
   store code and schema: real columns, a real compressed profile per run) in two stages,
   RUNS_SMALL and then --runs in all. After each stage a `peakline serve` subprocess is
   started on it and timed over REQUESTS requests each of: a model's history
   (GET /api/models/NAME: its newest 200 runs), the deploy gate
   (GET /api/models/NAME/verdict?version=V), the planner over 10 models (GET /api/plan) and
   the models page (GET /). Reported: median and 99th percentile latency, and the server's
   resident memory (VmRSS) after the requests. Flat means the two stages give about the
   same figures.
2. Push throughput: CLIENTS threads each push PUSHES profiles (POST /api/runs, gzip, each a
   distinct upload id) at once; reported: pushes per second and the p50/p99 push latency,
   against SQLite and against PostgreSQL (a private cluster started here with initdb, as in
   tests/python/test_server_durability.py).

--update-docs rewrites the "Validation server" section of docs/benchmarks.md (between its
markers) with the figures.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime as dt
import gzip
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

from server_helpers import MiB, Server, envelope, profile_dict  # noqa: E402
from test_server_durability import _free_port, _has_user, _pg_bin  # noqa: E402

RUNS_SMALL = 1_000
REQUESTS = 60
CLIENTS = 50
PUSHES = 10
BATCH = 5_000
BEGIN, END = "<!-- server_history:begin -->", "<!-- server_history:end -->"


def fill(url: str, start: int, stop: int, models: int) -> None:
    """Runs number start..stop-1, spread over ``models`` models, written in batches."""
    import sqlalchemy as sa

    from peakline.model.profile import Profile
    from peakline.server import schema as t
    from peakline.server import store
    from peakline.server.database import open_engine, writer
    from peakline.server.summary import summarize

    engine = open_engine(url)
    rng = random.Random(start)
    names = [f"model-{i:03d}" for i in range(models)]
    with writer(engine).begin() as conn:
        for name in names:
            store._ensure_model(conn, name)
        ids = dict(conn.execute(sa.select(t.models.c.name, t.models.c.id)).all())
    template = profile_dict(peak=500 * MiB)
    blob = store.pack_profile(Profile.from_dict(template), {"/srv/app/model.py": "x = 1\n"})
    verdict = json.dumps({"verdict": "pass", "budgets": [], "reasons": [], "baseline": None,
                          "notes": []})
    now = dt.datetime.now(dt.timezone.utc)
    for lo in range(start, stop, BATCH):
        runs, profiles = [], []
        for n in range(lo, min(stop, lo + BATCH)):
            peak = rng.randint(100, 2000) * MiB
            wall = rng.uniform(5, 60)
            timeline = [[0.0, peak // 5], [wall * rng.random(), peak], [wall, peak // 5]]
            timeline.sort()
            summary = summarize(Profile.from_dict({**template, "peak_bytes": peak,
                                                   "peak_rss_bytes": peak + 100 * MiB,
                                                   "elapsed_s": wall, "timeline": timeline}))
            runs.append({"id": n + 1, "upload_id": uuid.uuid4().hex,
                         "model_id": ids[names[n % models]], "version": f"{n // models}",
                         "created_at": now, "git_commit": None, "machine": "bench",
                         "verdict": "pass" if rng.random() < 0.9 else "fail",
                         "baseline_run_id": None, "verdict_json": verdict,
                         "metadata_json": "{}", **summary.columns()})
            profiles.append({"run_id": n + 1, "data": blob})
        with writer(engine).begin() as conn:
            conn.execute(t.runs.insert(), runs)
            conn.execute(t.profiles.insert(), profiles)
    with writer(engine).begin() as conn:  # what store.add_run keeps for each push
        conn.execute(sa.text("UPDATE models SET run_count = "
                             "(SELECT count(*) FROM runs WHERE runs.model_id = models.id)"))
    if engine.dialect.name == "postgresql":  # ids were given explicitly: move the sequence on
        with writer(engine).begin() as conn:
            conn.execute(sa.text("SELECT setval('runs_id_seq', (SELECT max(id) FROM runs))"))
    engine.dispose()


def timed(url: str) -> float:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        response.read()
        assert response.status == 200
    return time.perf_counter() - began


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as stream:
        return int(re.search(r"VmRSS:\s+(\d+) kB", stream.read()).group(1)) * 1024


def measure_reads(server_args: list[str], models: int) -> dict:
    names = [f"model-{i:03d}" for i in range(models)]
    plan_models = ",".join(names[:10])
    endpoints = {
        "history (200 newest runs)": lambda i: f"/api/models/{names[i % models]}",
        # versions 0 .. RUNS_SMALL/models - 1 exist at both stages
        "verdict of a version": lambda i: (f"/api/models/{names[i % models]}/verdict?version="
                                           f"{(7 * i) % (RUNS_SMALL // models)}"),
        "planner, 10 models": lambda i: f"/api/plan?memory=64GiB&models={plan_models}",
        "models page (UI)": lambda i: "/",
    }
    out = {}
    with Server(*server_args) as server:
        for name, path in endpoints.items():
            timed(server.base + path(0))  # warm
            latencies = [timed(server.base + path(i)) for i in range(REQUESTS)]
            out[name] = {"p50_ms": 1e3 * statistics.median(latencies),
                         "p99_ms": 1e3 * p(latencies, 0.99)}
        out["server_rss_bytes"] = rss_bytes(server.proc.pid)
    return out


def measure_pushes(server_args: list[str], token: str) -> dict:
    profile = profile_dict(peak=300 * MiB)
    bodies = [[gzip.compress(json.dumps(envelope("throughput", str(k), profile)).encode())
               for k in range(PUSHES)] for _ in range(CLIENTS)]
    with Server(*server_args) as server:
        barrier = threading.Barrier(CLIENTS + 1)

        def client(mine):
            barrier.wait()
            out = []
            for body in mine:
                request = urllib.request.Request(
                    server.base + "/api/runs", data=body, method="POST",
                    headers={"Content-Type": "application/json", "Content-Encoding": "gzip",
                             "Authorization": f"Bearer {token}"})
                began = time.perf_counter()
                with urllib.request.urlopen(request, timeout=300) as response:
                    response.read()
                    assert response.status == 201
                out.append(time.perf_counter() - began)
            return out

        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            futures = [pool.submit(client, mine) for mine in bodies]
            barrier.wait()
            began = time.perf_counter()
            latencies = [x for f in futures for x in f.result()]
            wall = time.perf_counter() - began
        with urllib.request.urlopen(server.base + "/api/models/throughput?limit=10000") as r:
            stored = len(json.loads(r.read())["runs"])
    assert stored == CLIENTS * PUSHES, (stored, CLIENTS * PUSHES)
    return {"pushes": len(latencies), "per_s": len(latencies) / wall,
            "p50_ms": 1e3 * statistics.median(latencies), "p99_ms": 1e3 * p(latencies, 0.99)}


def create_token(*db_args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "peakline", "serve", "token", "create", "bench",
                           *db_args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


class PostgreSQL:
    """A private cluster in a temporary directory (see the test fixture); its URL."""

    def __enter__(self) -> str:
        bindir = _pg_bin()
        if bindir is None:
            raise SystemExit("PostgreSQL is not installed (--skip-postgresql)")
        self.bindir = bindir
        self.folder = tempfile.mkdtemp(prefix="peakline-pg-bench-")
        self.as_user = []
        if os.geteuid() == 0:
            import pwd
            user = "postgres" if _has_user("postgres") else "nobody"
            entry = pwd.getpwnam(user)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            self.as_user = ["runuser", "-u", user, "--"]
        self.data = os.path.join(self.folder, "data")
        port = _free_port()
        run = lambda *a: subprocess.run([*self.as_user, *a], check=True, capture_output=True)  # noqa: E731
        run(f"{bindir}/initdb", "-D", self.data, "-U", "peakline", "--auth=trust", "-E", "UTF8")
        run(f"{bindir}/pg_ctl", "-D", self.data, "-o",
            f"-p {port} -k {self.folder} -c listen_addresses=127.0.0.1 -c max_connections=200",
            "-l", os.path.join(self.folder, "log"), "-w", "start")
        run(f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "peakline",
            "peakline")
        return f"postgresql://peakline@127.0.0.1:{port}/peakline"

    def __exit__(self, *exc) -> None:
        subprocess.run([*self.as_user, f"{self.bindir}/pg_ctl", "-D", self.data, "-m", "fast",
                        "stop"], capture_output=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def bench_database(label: str, url: str, server_args: list[str], runs: int, models: int
                   ) -> dict:
    out: dict = {"database": label}
    began = time.perf_counter()
    fill(url, 0, RUNS_SMALL, models)
    out[f"reads_at_{RUNS_SMALL}"] = measure_reads(server_args, models)
    fill(url, RUNS_SMALL, runs, models)
    out["fill_s"] = time.perf_counter() - began
    out[f"reads_at_{runs}"] = measure_reads(server_args, models)
    token = create_token(*server_args)
    out["pushes"] = measure_pushes(server_args, token)
    print(json.dumps(out, indent=1), file=sys.stderr, flush=True)
    return out


def render(results: list[dict], runs: int, models: int) -> str:
    load = os.getloadavg()
    lines = [
        "## Validation server", "",
        f"Generated by `benchmarks/server_history.py --runs {runs} --models {models}` "
        f"({dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node() or 'host'}: "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}, load average "
        f"{load[0]:.1f} at the end); method in the script's docstring and docs/server.md.", "",
        f"Read latency with {RUNS_SMALL:,} and with {runs:,} stored runs ({models} models; "
        f"{REQUESTS} requests each, one client, milliseconds, p50 / p99):", "",
        "| Database | Endpoint | " + f"{RUNS_SMALL:,} runs | {runs:,} runs |", "|---|---|---|---|"]
    for r in results:
        small, big = r[f"reads_at_{RUNS_SMALL}"], r[f"reads_at_{runs}"]
        for endpoint in (k for k in small if k != "server_rss_bytes"):
            lines.append(f"| {r['database']} | {endpoint} | {small[endpoint]['p50_ms']:.1f} / "
                         f"{small[endpoint]['p99_ms']:.1f} | {big[endpoint]['p50_ms']:.1f} / "
                         f"{big[endpoint]['p99_ms']:.1f} |")
        lines.append(f"| {r['database']} | server RSS after the requests | "
                     f"{small['server_rss_bytes'] / MiB:.0f} MiB | "
                     f"{big['server_rss_bytes'] / MiB:.0f} MiB |")
    lines += ["", f"Pushes from {CLIENTS} clients at once ({CLIENTS} x {PUSHES} runs, each a "
                  "gzip upload of a profile, judged and committed before the answer):", "",
              "| Database | pushes | pushes/s | p50 latency | p99 latency |", "|---|---|---|---|---|"]
    for r in results:
        q = r["pushes"]
        lines.append(f"| {r['database']} | {q['pushes']} | {q['per_s']:.1f} | "
                     f"{q['p50_ms']:.0f} ms | {q['p99_ms']:.0f} ms |")
    return "\n".join(lines) + "\n"


def update_docs(section: str) -> None:
    path = os.path.join(ROOT, "docs", "benchmarks.md")
    text = open(path, encoding="utf-8").read()
    block = f"{BEGIN}\n{section}{END}\n"
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END) + 1:]
    else:
        text = text.rstrip("\n") + "\n\n" + block
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--models", type=int, default=50)
    parser.add_argument("--skip-postgresql", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--update-docs", action="store_true")
    opts = parser.parse_args()
    results = []
    folder = tempfile.mkdtemp(prefix="peakline-bench-")
    try:
        results.append(bench_database("SQLite", f"sqlite:///{folder}/peakline.db",
                                      ["--data-dir", folder], opts.runs, opts.models))
        if not opts.skip_postgresql:
            with PostgreSQL() as url:
                results.append(bench_database("PostgreSQL", url, ["--db", url], opts.runs,
                                              opts.models))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    section = render(results, opts.runs, opts.models)
    sys.stdout.write(section)
    if opts.json:
        with open(opts.json, "w") as stream:
            json.dump(results, stream, indent=1)
    if opts.update_docs:
        update_docs(section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
