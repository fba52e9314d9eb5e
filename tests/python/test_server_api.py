"""The validation server's API and command line, end to end on 127.0.0.1: `peakline serve`
in a subprocess (SQLite in a temporary data dir), `peakline push` / `peakline check --push`,
budgets, verdicts against budgets and the previous passing version, auth, bad uploads.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest
from peakline.model.profile_file import read_profile
from server_helpers import (InProcessServer, MiB, Server, create_token, envelope, peakline, profile_dict, push,
                            request)

pytest.importorskip("starlette", reason="needs the server extra: pip install 'peakline[server]'")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("server-data")


@pytest.fixture(scope="module")
def token(data_dir):
    return create_token("ci", "--data-dir", str(data_dir))


@pytest.fixture(scope="module")
def server(data_dir, token):
    with Server("--data-dir", str(data_dir), "--max-upload", "2MiB") as s:
        yield s


def write_profile(tmp_path, name="p.json", **figures):
    path = tmp_path / name
    path.write_text(json.dumps(profile_dict(**figures)))
    return str(path)


def test_push_prints_the_verdict_and_a_deploy_script_reads_it_back(server, token, tmp_path):
    path = write_profile(tmp_path, peak=100 * MiB)
    done = peakline("push", "--server", server.base, "--model", "ranker", "--version", "1.0",
                    path, env={"PEAKLINE_TOKEN": token})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ranker 1.0: PASS (run #")
    status, answer = request(server.base + "/api/models/ranker/verdict?version=1.0")
    assert status == 200
    assert answer["verdict"] == "pass" and answer["version"] == "1.0"
    assert answer["figures"]["peak_bytes"] == 100 * MiB
    assert answer["figures"]["peak_rss_bytes"] == 120 * MiB
    status, run = request(f"{server.base}/api/runs/{answer['run_id']}")
    assert run["git_commit"] is None or len(run["git_commit"]) == 40
    assert run["metadata"]["packages"]["peakline"]  # the packages' versions travel along
    assert run["program"] == "model.py"
    # the stored profile comes back as the profile reader read the pushed one
    status, stored = request(f"{server.base}/api/runs/{answer['run_id']}/profile")
    assert stored == read_profile(path).to_dict()


def test_budgets_and_the_previous_passing_version_judge_every_run(server, token):
    base = server.base
    status, body = request(base + "/api/models/detector/budgets", method="PUT",
                           body={"max_peak": "150MiB", "tolerance": "10"}, token=token)
    assert status == 200 and body["budgets"] == {"max_peak": "150MiB", "tolerance": "10"}
    verdicts = {}
    for version, peak in (("1", 100), ("2", 140), ("3", 105), ("4", 200)):
        status, answer = push(base, token, "detector", version,
                              profile_dict(peak=peak * MiB, rss=(peak + 20) * MiB))
        assert status == 201, answer
        verdicts[version] = answer
    assert verdicts["1"]["verdict"] == "pass" and verdicts["1"]["baseline"] is None
    # 140 MiB: within max_peak, but 40 % over version 1 with a 10 % tolerance
    v2 = verdicts["2"]
    assert v2["verdict"] == "fail" and v2["baseline"]["version"] == "1"
    assert [r.split(":")[0] for r in v2["reasons"]] == ["baseline_peak", "baseline_rss",
                                                       "baseline_line_peak"]
    # version 2 failed, so version 3 is compared with version 1 (105 <= 110 MiB)
    assert verdicts["3"]["verdict"] == "pass" and verdicts["3"]["baseline"]["version"] == "1"
    v4 = verdicts["4"]
    assert v4["verdict"] == "fail" and v4["baseline"]["version"] == "3"
    assert any(r.startswith("max_peak: 200.0 MiB > allowed 150.0 MiB") for r in v4["reasons"])
    max_peak = next(b for b in v4["budgets"] if b["name"] == "max_peak")
    # the evidence names the line, with the source sent by the client
    assert max_peak["lines"][0]["line"] == 1
    assert max_peak["lines"][0]["source"] == "big = bytearray(N)  # the model's weights"
    # the deploy gate: the newest run of a version
    status, answer = request(base + "/api/models/detector/verdict?version=2")
    assert status == 200 and answer["verdict"] == "fail" and answer["run_id"] == v2["run_id"]
    status, history = request(base + "/api/models/detector")
    assert [r["version"] for r in history["runs"]] == ["1", "2", "3", "4"]
    assert [r["peak_bytes"] for r in history["runs"]] == [100 * MiB, 140 * MiB, 105 * MiB,
                                                          200 * MiB]
    # a budget removed with null; an unknown or bad one is refused and nothing changes
    status, body = request(base + "/api/models/detector/budgets", method="PUT",
                           body={"tolerance": None}, token=token)
    assert body["budgets"] == {"max_peak": "150MiB"}
    for bad in ({"max_peek": "1GB"}, {"max_peak": "lots"}, {"baseline": "/etc/passwd"}):
        status, body = request(base + "/api/models/detector/budgets", method="PUT", body=bad,
                               token=token)
        assert status == 400 and "max_pe" in body["error"] or "baseline" in body["error"]
    assert request(base + "/api/models/detector/budgets")[1]["budgets"] == {"max_peak": "150MiB"}


def test_an_unmeasured_budget_fails_with_its_reason_and_the_others_are_judged(server, token):
    request(server.base + "/api/models/gpu-model/budgets", method="PUT",
            body={"max_gpu_peak": "1GiB", "max_cpu": "10s"}, token=token)
    status, answer = push(server.base, token, "gpu-model", "1", profile_dict())
    assert answer["verdict"] == "fail"
    assert answer["reasons"][0].startswith("max_gpu_peak: cannot be judged")
    assert [b["ok"] for b in answer["budgets"]] == [False, True]
    status, answer = push(server.base, token, "gpu-model", "2",
                          profile_dict(gpu_peak=512 * MiB))
    assert answer["verdict"] == "pass", answer["reasons"]


def test_check_push_judges_locally_and_on_the_server(server, token, tmp_path):
    path = write_profile(tmp_path, peak=50 * MiB)
    done = peakline("check", "--profile", path, "--max-peak", "1GiB", "--no-config",
                    "--push", server.base, "--model", "checked", "--version", "7",
                    env={"PEAKLINE_TOKEN": token})
    assert done.returncode == 0, done.stderr
    assert "server: checked 7: PASS" in done.stderr
    assert request(server.base + "/api/models/checked/verdict")[1]["version"] == "7"
    done = peakline("check", "--profile", path, "--push", server.base, "--model", "checked",
                    env={"PEAKLINE_TOKEN": token})
    assert done.returncode == 2 and "--push needs --model NAME and --version V" in done.stderr
    done = peakline("check", "--profile", path, "--push", server.base, "--model", "checked",
                    "--version", "8", env={"PEAKLINE_TOKEN": ""})
    assert done.returncode == 2 and "no token" in done.stderr


def test_writes_need_a_valid_token_and_only_its_hash_is_stored(server, token, data_dir):
    profile = profile_dict()
    assert push(server.base, "", "m", "1", profile)[0] == 401
    status, body = push(server.base, "pl_wrong", "m", "1", profile)
    assert status == 403 and body["error"] == "the token is not valid"
    status, _ = request(server.base + "/api/models/m/budgets", method="PUT",
                        body={"max_peak": "1GB"})
    assert status == 401
    assert request(server.base + "/api/models/m")[0] == 404  # nothing was stored
    with sqlite3.connect(data_dir / "peakline.db") as db:
        rows = db.execute("SELECT name, token_sha256 FROM tokens").fetchall()
        dump = "\n".join(db.iterdump())
    assert [name for name, _ in rows] == ["ci"] and len(rows[0][1]) == 64
    assert token not in dump


def test_a_token_name_is_used_once(tmp_path):
    from peakline.errors import UsageError
    from peakline.server import store
    from peakline.server.database import open_engine, url_for

    engine = open_engine(url_for(None, str(tmp_path)))
    first = store.create_token(engine, "ci")
    with pytest.raises(UsageError, match="a token named 'ci' exists already"):
        store.create_token(engine, "ci")
    assert store.token_valid(engine, first) and not store.token_valid(engine, first + "x")
    engine.dispose()


def test_reads_can_require_a_token(tmp_path):
    from peakline.server import store

    with InProcessServer(f"sqlite:///{tmp_path}/p.db", auth_reads=True) as s:
        token = store.create_token(s.engine, "reader")
        assert request(s.base + "/api/models")[0] == 401
        assert request(s.base + "/")[0] == 401
        status, body = request(s.base + "/api/models", token=token)
        assert status == 200 and body == {"models": []}


BAD_UPLOADS = [
    (b"not json", {}, 400, "not valid JSON"),
    (b"[1, 2]", {}, 400, "expected a JSON object"),
    (gzip.compress(b'{"model": "m"}', mtime=0)[:-6], {"Content-Encoding": "gzip"}, 400, "truncated"),
    (b"{}", {"Content-Encoding": "br"}, 415, "unsupported Content-Encoding"),
    (b"x" * (3 << 20), {}, 413, "larger than the server's limit"),
    # 1 GiB of zeros in 1 MiB of gzip: refused after 2 MiB are inflated
    (gzip.compress(b"\0" * (64 << 20), mtime=0), {"Content-Encoding": "gzip"}, 413, "larger than"),
]


@pytest.mark.parametrize("raw, headers, status, message", BAD_UPLOADS)
def test_bad_uploads_get_a_clear_4xx(server, token, raw, headers, status, message):
    got, body = request(server.base + "/api/runs", method="POST", raw=raw, token=token,
                        headers=headers)
    assert got == status and message in body["error"], body


@pytest.mark.parametrize("chunked", [False, True], ids=["declared length", "chunked"])
def test_a_client_still_sending_an_oversized_upload_gets_the_413(server, token, chunked):
    # 3 MiB against the 2 MiB limit, sent in pieces with pauses, so that the server decides
    # while the client is still sending: the client must be able to send it all and read the
    # answer (not a broken pipe or a reset).
    import socket
    import time
    import urllib.parse

    url = urllib.parse.urlsplit(server.base)
    piece, pieces = 64 << 10, 48
    length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {piece * pieces}"
    head = (f"POST /api/runs HTTP/1.1\r\nHost: {url.netloc}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
            f"{length}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(head)
        for _ in range(pieces):
            data = b"x" * piece
            sock.sendall(b"%x\r\n%s\r\n" % (piece, data) if chunked else data)
            time.sleep(0.005)
        if chunked:
            sock.sendall(b"0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split()[1] == b"413", answer[:500]
    assert b"larger than the server's limit" in rest


@pytest.mark.parametrize("change, status, message", [
    ({"profile": {"format": "speedscope"}}, 422, "not a peakline profile"),
    ({"profile": dict(profile_dict(), peak_bytes="lots")}, 422, "peak_bytes"),
    ({"profile": dict(profile_dict(), version=99)}, 422, "version 99"),
    ({"model": "../../etc/passwd"}, 400, "bad model name"),
    ({"model": "a'; DROP TABLE runs; --"}, 400, "bad model name"),
    ({"version": ""}, 400, "bad version"),
    ({"upload_id": "x"}, 400, "upload_id"),
    ({"sources": {"a.py": 1}}, 400, "sources"),
])
def test_foreign_or_corrupt_runs_are_refused_with_the_reason(server, token, change, status,
                                                             message):
    body = {**envelope("refused", "1", profile_dict()), **change}
    got, answer = request(server.base + "/api/runs", method="POST", body=body, token=token)
    assert got == status and message in answer["error"], answer
    assert request(server.base + "/api/models/refused")[0] == 404


def test_query_values_are_parameters_not_sql(server, token):
    push(server.base, token, "sqlsafe", "1", profile_dict())
    status, body = request(server.base + "/api/models/sqlsafe/verdict?version=1%27%20OR%20%271%27%3D%271")
    assert status == 400 and "bad version" in body["error"]
    status, body = request(server.base + "/api/models/sqlsafe/verdict?version=1:0")
    assert status == 404  # a valid version that matches nothing matches nothing
    assert request(server.base + "/api/models/sqlsafe/verdict?version=1")[0] == 200


def test_a_retried_push_is_stored_once(server, token):
    first = push(server.base, token, "retried", "1", profile_dict(), upload_id="same-id-123")
    again = push(server.base, token, "retried", "1", profile_dict(), upload_id="same-id-123")
    assert first[0] == 201 and again[0] == 200
    assert again[1]["run_id"] == first[1]["run_id"] and again[1]["created"] is False
    assert len(request(server.base + "/api/models/retried")[1]["runs"]) == 1


def test_paths_named_by_a_profile_are_never_opened_on_the_server(server, token):
    profile = profile_dict(filename="/etc/passwd")
    request(server.base + "/api/models/snoop/budgets", method="PUT",
            body={"max_peak": "1MiB"}, token=token)
    status, answer = push(server.base, token, "snoop", "1", profile, sources={})
    assert status == 201
    evidence = answer["budgets"][0]["lines"][0]
    assert evidence["file"] == "/etc/passwd" and evidence["source"] == ""
    status, page = request(f"{server.base}/runs/{answer['run_id']}/report")
    assert status == 200 and "root:" not in page


def test_the_planner_endpoint_adds_the_latest_passing_versions(server, token):
    for name, peak in (("plan-a", 300), ("plan-b", 500)):
        push(server.base, token, name, "1", profile_dict(peak=peak * MiB, rss=peak * MiB))
    status, plan = request(server.base + "/api/plan?memory=1GiB&models=plan-a,plan-b&trials=200")
    assert status == 200, plan
    assert plan["worst_case_bytes"] == 800 * MiB and plan["worst_case_fits"]
    assert [m["name"] for m in plan["models"]] == ["plan-a", "plan-b"]
    assert plan["estimate"]["trials"] == 200 and plan["estimate"]["seed"] == 0
    status, body = request(server.base + "/api/plan?memory=1GiB&models=plan-a,nothing")
    assert status == 404 and "nothing" in body["error"]
    status, body = request(server.base + "/api/plan?memory=much&models=plan-a")
    assert status == 400 and "much" in body["error"]
    assert request(server.base + "/api/plan?models=plan-a")[0] == 400


def test_the_migrations_build_exactly_the_schema(tmp_path):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from peakline.server.database import open_engine
    from peakline.server.schema import metadata

    engine = open_engine(f"sqlite:///{tmp_path}/m.db")
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []
    engine.dispose()


def test_an_old_database_is_upgraded_in_place(tmp_path):
    """A database made by revision 0001 (no run counter) gets its counts from its runs."""
    import datetime

    import sqlalchemy as sa
    from alembic import command
    from alembic.config import Config

    from peakline.server import database, store

    url = f"sqlite:///{tmp_path}/old.db"
    engine = sa.create_engine(url)
    config = Config()
    config.set_main_option("script_location",
                           str(Path(database.__file__).parent / "migrations"))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
        now = datetime.datetime.now(datetime.timezone.utc)
        conn.execute(sa.text("INSERT INTO models (id, name, created_at) VALUES (1, 'old', :t)"),
                     {"t": now})
        for i in (1, 2):
            conn.execute(sa.text(
                "INSERT INTO runs (id, upload_id, model_id, version, created_at, program, "
                "started_at, cpu_s, wall_s, verdict, verdict_json, timeline_json, metadata_json)"
                " VALUES (:i, :u, 1, '1', :t, 'p.py', 'x', 0, 0, 'pass', '{}', '{}', '{}')"),
                {"i": i, "u": f"upload-{i:04d}", "t": now})
    engine.dispose()
    upgraded = database.open_engine(url)
    assert [(m["name"], m["runs"]) for m in store.overview(upgraded)] == [("old", 2)]
    upgraded.dispose()
