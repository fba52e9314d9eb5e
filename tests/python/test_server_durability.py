"""The validation server under load and failure, on 127.0.0.1: a server killed with SIGKILL
in the middle of a burst of pushes loses no run it acknowledged and leaves an intact database;
50 clients pushing at once lose and duplicate nothing, against SQLite and against a real
PostgreSQL server (Debian's postgresql package: a private cluster made by initdb in a temporary
directory, on a free loopback port, run as an unprivileged user when the tests run as root).
"""

from __future__ import annotations

import concurrent.futures
import glob
import os
import shutil
import socket
import sqlite3
import subprocess
import tempfile
import threading
import time
import uuid

import pytest
from server_helpers import MiB, Server, create_token, profile_dict, push, request

pytest.importorskip("starlette", reason="needs the server extra: pip install 'peakline[server]'")

CLIENTS = 50
PUSHES_PER_CLIENT = 2


def test_sigkill_during_a_burst_loses_no_acknowledged_run_then_fifty_clients_push_at_once(
        tmp_path):
    """SQLite. The 50 clients push to the restarted server (one server start less)."""
    token = create_token("ci", "--data-dir", str(tmp_path))
    profile = profile_dict(peak=10 * MiB)
    acknowledged: list[tuple[str, int]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(base):
        while not stop.is_set():
            upload_id = uuid.uuid4().hex
            try:
                status, answer = push(base, token, "burst", "1", profile, upload_id=upload_id)
            except OSError:
                return  # the server is gone: this push was never acknowledged
            if status == 201:
                with lock:
                    acknowledged.append((upload_id, answer["run_id"]))

    server = Server("--data-dir", str(tmp_path)).start()
    try:
        threads = [threading.Thread(target=client, args=(server.base,)) for _ in range(8)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while len(acknowledged) < 30 and time.monotonic() < deadline:
            time.sleep(0.01)
        server.kill()  # SIGKILL while the clients are still pushing
        stop.set()
        for t in threads:
            t.join(timeout=60)
    finally:
        server.kill()
        stop.set()
    assert len(acknowledged) >= 30
    with sqlite3.connect(tmp_path / "peakline.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        stored = dict(db.execute("SELECT upload_id, id FROM runs").fetchall())
        orphans = db.execute("SELECT count(*) FROM runs LEFT JOIN profiles ON "
                             "profiles.run_id = runs.id WHERE profiles.run_id IS NULL").fetchone()
    missing = [(u, i) for u, i in acknowledged if stored.get(u) != i]
    assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged runs missing"
    assert orphans == (0,)  # a run and its profile are committed together or not at all
    with Server("--data-dir", str(tmp_path)) as again:
        upload_id, run_id = acknowledged[-1]
        status, run = request(f"{again.base}/api/runs/{run_id}")
        assert status == 200 and run["upload_id"] == upload_id
        assert push(again.base, token, "burst", "2", profile)[0] == 201
        fifty_clients(again.base, token, "parallel")


def fifty_clients(base: str, token: str, model: str) -> list[float]:
    """CLIENTS threads each push PUSHES_PER_CLIENT runs; checks that every one is stored
    exactly once; returns each push's latency in seconds."""
    profile = profile_dict(peak=20 * MiB)
    sent = [[uuid.uuid4().hex for _ in range(PUSHES_PER_CLIENT)] for _ in range(CLIENTS)]
    start = threading.Barrier(CLIENTS)

    def client(ids):
        start.wait()
        out = []
        for upload_id in ids:
            began = time.perf_counter()
            status, answer = push(base, token, model, "1", profile, upload_id=upload_id)
            out.append((status, answer, time.perf_counter() - began))
        return out

    with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
        results = [r for rs in pool.map(client, sent) for r in rs]
    assert [status for status, _, _ in results] == [201] * (CLIENTS * PUSHES_PER_CLIENT), \
        [a for s, a, _ in results if s != 201][:3]
    status, history = request(f"{base}/api/models/{model}?limit=10000")
    stored = [run["upload_id"] for run in history["runs"]]
    assert sorted(stored) == sorted(u for ids in sent for u in ids)  # none lost, none twice
    assert len({run["id"] for run in history["runs"]}) == len(stored)
    models = {m["name"]: m for m in request(f"{base}/api/models")[1]["models"]}
    assert models[model]["runs"] == len(stored)  # the counter kept under concurrent pushes
    return [seconds for _, _, seconds in results]


# ---- PostgreSQL ------------------------------------------------------------------------------

def _pg_bin() -> str | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return os.path.dirname(found[-1]) if found else shutil.which("initdb") and \
        os.path.dirname(shutil.which("initdb"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def postgresql():
    """A private PostgreSQL cluster: its URL. PostgreSQL refuses to run as root, so as root
    the cluster belongs to the ``postgres`` user (made by the Debian package) or ``nobody``."""
    bindir = _pg_bin()
    if bindir is None:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    folder = tempfile.mkdtemp(prefix="peakline-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:
        import pwd
        user = next((u for u in ("postgres", "nobody") if _has_user(u)), None)
        entry = pwd.getpwnam(user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        as_user = ["runuser", "-u", user, "--"]
    data = os.path.join(folder, "data")
    port = _free_port()
    subprocess.run([*as_user, f"{bindir}/initdb", "-D", data, "-U", "peakline",
                    "--auth=trust", "-E", "UTF8", "--no-sync"], check=True,
                   capture_output=True, timeout=120)
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200"
    subprocess.run([*as_user, f"{bindir}/pg_ctl", "-D", data, "-o", options, "-l",
                    os.path.join(folder, "log"), "-w", "-t", "60", "start"], check=True,
                   capture_output=True, timeout=120)
    try:
        subprocess.run([*as_user, f"{bindir}/createdb", "-h", "127.0.0.1", "-p", str(port),
                        "-U", "peakline", "peakline"], check=True, capture_output=True,
                       timeout=60)
        yield f"postgresql://peakline@127.0.0.1:{port}/peakline"
    finally:
        subprocess.run([*as_user, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"],
                       capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


def _has_user(name: str) -> bool:
    import pwd
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def test_the_same_server_runs_on_postgresql(postgresql):
    token = create_token("ci", "--db", postgresql)
    with Server("--db", postgresql) as server:
        base = server.base
        status, body = request(base + "/api/models/pg/budgets", method="PUT",
                               body={"max_peak": "64MiB"}, token=token)
        assert status == 200
        assert push(base, token, "pg", "1", profile_dict(peak=50 * MiB))[1]["verdict"] == "pass"
        status, answer = push(base, token, "pg", "2", profile_dict(peak=80 * MiB))
        assert answer["verdict"] == "fail" and answer["baseline"]["version"] == "1"
        status, answer = request(base + "/api/models/pg/verdict?version=2")
        assert status == 200 and answer["reasons"][0].startswith("max_peak: 80.0 MiB")
        status, plan = request(base + "/api/plan?memory=1GiB&models=pg&trials=100")
        assert status == 200 and plan["models"][0]["version"] == "1"
        fifty_clients(base, token, "pg-parallel")
