"""Every query the server makes, on SQLAlchemy Core: names and values are always bound
parameters, never text pasted into SQL.

A push (``add_run``) is judged before its transaction starts (judging reads the model's
budgets and the previous passing run's profile), then stored in one write transaction: the
model row if new, the run's columns, its compressed profile. The caller acknowledges the
run only after that transaction committed. ``upload_id`` (unique, chosen by the client) makes
a retried push return the run already stored instead of storing it twice.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import secrets
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from peakline.errors import UsageError
from peakline.model.profile import Profile
from peakline.server import schema as t
from peakline.server.database import write_transaction
from peakline.server.judging import Baseline, convert_budgets, judge_run
from peakline.server.summary import summarize

SPARKLINE_RUNS = 30
HISTORY_LIMIT = 200


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _sha256(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# ---- tokens -------------------------------------------------------------------------------

def create_token(engine: sa.Engine, name: str) -> str:
    """A new random token named ``name``; only its SHA-256 is stored (the token is 256 random
    bits, so a fast hash is enough: there is nothing to guess from it)."""
    if not name or len(name) > 200:
        raise UsageError("a token name must be 1 to 200 characters")
    token = "pl_" + secrets.token_urlsafe(32)
    try:
        with write_transaction(engine) as conn:
            conn.execute(t.tokens.insert().values(name=name, token_sha256=_sha256(token),
                                                  created_at=_now()))
    except sa.exc.IntegrityError:
        raise UsageError(f"a token named {name!r} exists already") from None
    return token


def token_valid(engine: sa.Engine, token: str) -> bool:
    with engine.connect() as conn:
        found = conn.execute(sa.select(t.tokens.c.id).where(
            t.tokens.c.token_sha256 == _sha256(token))).first()
    return found is not None


# ---- models and budgets -------------------------------------------------------------------

def _model_id(conn: sa.Connection, name: str) -> int | None:
    return conn.execute(sa.select(t.models.c.id).where(t.models.c.name == name)).scalar()


def _ensure_model(conn: sa.Connection, name: str) -> int:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    conn.execute(insert(t.models).values(name=name, created_at=_now())
                 .on_conflict_do_nothing(index_elements=["name"]))
    return _model_id(conn, name)


def budgets_of(engine: sa.Engine, model: str) -> dict[str, str]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.budgets.c.name, t.budgets.c.value)
                            .join(t.models, t.models.c.id == t.budgets.c.model_id)
                            .where(t.models.c.name == model)).all()
    return {name: value for name, value in rows}


def set_budgets(engine: sa.Engine, model: str, values: Mapping[str, Any]) -> dict[str, str]:
    """Set (or, with a None or empty value, remove) budgets of ``model``; values are checked
    with peakline.gates.budgets before anything is stored. Returns all budgets now set."""
    text = {name: (None if value is None or value == "" else
                   ("true" if value is True else "false" if value is False else str(value)))
            for name, value in values.items()}
    convert_budgets({k: v for k, v in text.items() if v is not None}, model=model)
    with write_transaction(engine) as conn:
        model_id = _ensure_model(conn, model)
        for name, value in text.items():
            conn.execute(t.budgets.delete().where(t.budgets.c.model_id == model_id,
                                                  t.budgets.c.name == name))
            if value is not None:
                conn.execute(t.budgets.insert().values(model_id=model_id, name=name,
                                                       value=value))
    return budgets_of(engine, model)


# ---- runs ---------------------------------------------------------------------------------

RUN_COLUMNS = [c for c in t.runs.c if c.name not in ("timeline_json", "metadata_json",
                                                     "verdict_json")]


def pack_profile(profile: Profile, sources: Mapping[str, str]) -> bytes:
    text = json.dumps({"profile": profile.to_dict(), "sources": dict(sources)},
                      separators=(",", ":"), allow_nan=False)
    return zlib.compress(text.encode("utf-8"), 6)


def unpack_profile(data: bytes, *, source: str) -> tuple[Profile, dict[str, str]]:
    stored = json.loads(zlib.decompress(data))
    return Profile.from_dict(stored["profile"], source=source), stored.get("sources") or {}


def _baseline(engine: sa.Engine, model: str, version: str) -> Baseline | None:
    """The newest passing run of ``model`` of another version, with its profile."""
    with engine.connect() as conn:
        row = conn.execute(
            sa.select(t.runs.c.id, t.runs.c.version, t.profiles.c.data)
            .join(t.models, t.models.c.id == t.runs.c.model_id)
            .join(t.profiles, t.profiles.c.run_id == t.runs.c.id)
            .where(t.models.c.name == model, t.runs.c.verdict == "pass",
                   t.runs.c.version != version)
            .order_by(t.runs.c.id.desc()).limit(1)).first()
    if row is None:
        return None
    profile, sources = unpack_profile(row.data, source=f"run {row.id}")
    return Baseline(row.id, row.version, profile, sources)


def run_by_upload(engine: sa.Engine, upload_id: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(_run_query().where(t.runs.c.upload_id == upload_id)).first()
    return run_dict(row) if row else None


def add_run(engine: sa.Engine, *, upload_id: str, model: str, version: str,
            metadata: Mapping[str, Any], profile: Profile, sources: Mapping[str, str]
            ) -> tuple[dict[str, Any], bool]:
    """Judge and store one pushed run; (the run, True) once committed, or (the run stored
    earlier under ``upload_id``, False)."""
    existing = run_by_upload(engine, upload_id)
    if existing is not None:
        return existing, False
    verdict = judge_run(profile, sources, budgets_of(engine, model),
                        _baseline(engine, model, version), model=model)
    summary = summarize(profile)
    blob = pack_profile(profile, sources)
    meta = dict(metadata)
    try:
        with write_transaction(engine) as conn:
            model_id = _ensure_model(conn, model)
            run_id = conn.execute(t.runs.insert().values(
                upload_id=upload_id, model_id=model_id, version=version, created_at=_now(),
                git_commit=_short(meta.get("git_commit"), 64),
                machine=_short(meta.get("machine"), 500),
                verdict=verdict["verdict"],
                baseline_run_id=(verdict["baseline"] or {}).get("run_id"),
                verdict_json=json.dumps(verdict, allow_nan=False),
                metadata_json=json.dumps(meta, allow_nan=False),
                **summary.columns()).returning(t.runs.c.id)).scalar_one()
            conn.execute(t.profiles.insert().values(run_id=run_id, data=blob))
            conn.execute(t.models.update().where(t.models.c.id == model_id)
                         .values(run_count=t.models.c.run_count + 1))
    except sa.exc.IntegrityError:
        existing = run_by_upload(engine, upload_id)
        if existing is None:
            raise
        return existing, False
    return run(engine, run_id), True


def _short(value: Any, limit: int) -> str | None:
    return None if value is None else str(value)[:limit]


def _run_query(*extra: sa.ColumnElement) -> sa.Select:
    return (sa.select(*RUN_COLUMNS, t.runs.c.verdict_json, t.models.c.name.label("model"),
                      *extra)
            .join(t.models, t.models.c.id == t.runs.c.model_id))


def run_dict(row: Any) -> dict[str, Any]:
    out = {c.name: getattr(row, c.name) for c in RUN_COLUMNS}
    out["model"] = row.model
    out["created_at"] = row.created_at.isoformat() if row.created_at else None
    out["verdict_detail"] = json.loads(row.verdict_json)
    for name in ("metadata_json", "timeline_json"):
        if hasattr(row, name):
            out[name[:-5]] = json.loads(getattr(row, name))
    return out


def run(engine: sa.Engine, run_id: int) -> dict[str, Any] | None:
    with engine.connect() as conn:
        row = conn.execute(_run_query(t.runs.c.metadata_json, t.runs.c.timeline_json)
                           .where(t.runs.c.id == run_id)).first()
    return run_dict(row) if row else None


def run_profile(engine: sa.Engine, run_id: int) -> tuple[Profile, dict[str, str]] | None:
    with engine.connect() as conn:
        data = conn.execute(sa.select(t.profiles.c.data)
                            .where(t.profiles.c.run_id == run_id)).scalar()
    return None if data is None else unpack_profile(data, source=f"run {run_id}")


def verdict_of(engine: sa.Engine, model: str, version: str | None) -> dict[str, Any] | None:
    """The newest run of ``model`` at ``version`` (the newest run at all without one)."""
    query = _run_query().where(t.models.c.name == model)
    if version is not None:
        query = query.where(t.runs.c.version == version)
    with engine.connect() as conn:
        row = conn.execute(query.order_by(t.runs.c.id.desc()).limit(1)).first()
    return run_dict(row) if row else None


def history(engine: sa.Engine, model: str, limit: int = HISTORY_LIMIT) -> list[dict[str, Any]]:
    """The newest ``limit`` runs of ``model``, oldest first (index ix_runs_model_id)."""
    with engine.connect() as conn:
        model_id = _model_id(conn, model)
        if model_id is None:
            return []
        rows = conn.execute(_run_query().where(t.runs.c.model_id == model_id)
                            .order_by(t.runs.c.id.desc()).limit(limit)).all()
    return [run_dict(row) for row in reversed(rows)]


def model_exists(engine: sa.Engine, model: str) -> bool:
    with engine.connect() as conn:
        return _model_id(conn, model) is not None


def overview(engine: sa.Engine) -> list[dict[str, Any]]:
    """Every model with its newest run and the heap peaks of its last SPARKLINE_RUNS runs
    (one indexed query each: their cost does not grow with the history)."""
    out = []
    with engine.connect() as conn:
        models = conn.execute(sa.select(t.models.c.id, t.models.c.name, t.models.c.run_count)
                              .order_by(t.models.c.name)).all()
        for model_id, name, count in models:
            peaks = conn.execute(sa.select(t.runs.c.peak_bytes)
                                 .where(t.runs.c.model_id == model_id)
                                 .order_by(t.runs.c.id.desc()).limit(SPARKLINE_RUNS)).scalars()
            latest = conn.execute(_run_query().where(t.runs.c.model_id == model_id)
                                  .order_by(t.runs.c.id.desc()).limit(1)).first()
            out.append({"name": name, "runs": count,
                        "latest": run_dict(latest) if latest else None,
                        "peaks": list(reversed(list(peaks)))})
    return out


def latest_passing(engine: sa.Engine, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """For each model named, its newest passing run with its resampled timeline."""
    out = {}
    with engine.connect() as conn:
        for name in names:
            row = conn.execute(_run_query(t.runs.c.timeline_json)
                               .where(t.models.c.name == name, t.runs.c.verdict == "pass")
                               .order_by(t.runs.c.id.desc()).limit(1)).first()
            if row is not None:
                out[name] = run_dict(row)
    return out


def count_runs(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(t.runs)).scalar()
