"""The HTTP API (Starlette; docs/server.md lists every endpoint) and the limits on what a
request can do:

* writes (``POST /api/runs``, ``PUT /api/models/{name}/budgets``, the budget form) need a
  token (``Authorization: Bearer TOKEN``, or the form's token field); reads too when the
  server runs with ``--auth-reads``;
* an upload is read at most ``max_upload_bytes`` (after gzip decoding) and validated with the
  profile reader (model.profile_file): a foreign, corrupt or oversized one gets a 4xx with
  one line that says why;
* names are checked against NAME_PATTERN and every value reaches SQL as a bound parameter
  (store.py); nothing from a request names a file: reports are rendered from the stored
  profile and the source text sent with it.

The database calls are blocking (SQLAlchemy Core); each runs in Starlette's thread pool.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from peakline.errors import PeaklineError, ProfileFormatError, UsageError
from peakline.model.profile import Profile
from peakline.model.profile_file import strict_json
from peakline.server import planner, store

DEFAULT_MAX_UPLOAD_BYTES = 64 << 20
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
VERSION_PATTERN = re.compile(r"[A-Za-z0-9._+:~-]{1,200}")
UPLOAD_ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{8,64}")
MAX_SOURCE_FILES = 2000
MAX_PLAN_MODELS = 200


@dataclass
class Settings:
    engine: sa.Engine
    max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES
    auth_reads: bool = False


class ApiError(HTTPException):
    pass


def check_name(name: str, what: str = "model name") -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ApiError(400, f"bad {what} {name!r}: letters, digits, '.', '_' and '-', "
                            "at most 200, starting with a letter or digit")
    return name


def check_version(version: Any) -> str:
    if not isinstance(version, str) or not VERSION_PATTERN.fullmatch(version):
        raise ApiError(400, f"bad version {version!r}: 1 to 200 of letters, digits and "
                            "'._+:~-'")
    return version


def settings(request: Request) -> Settings:
    return request.app.state.settings


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def require_token(request: Request, token: str | None = None) -> None:
    token = token or bearer_token(request)
    if not token:
        raise ApiError(401, "this needs a token: Authorization: Bearer TOKEN (create one with "
                            "`peakline serve token create NAME`)")
    if not await run_in_threadpool(store.token_valid, settings(request).engine, token):
        raise ApiError(403, "the token is not valid")


def reader(handler: Callable[[Request], Awaitable[Response]]):
    """A read endpoint: open, or token-protected with --auth-reads."""
    async def wrapped(request: Request) -> Response:
        if settings(request).auth_reads:
            await require_token(request)
        return await handler(request)
    wrapped.__name__ = handler.__name__
    return wrapped


async def read_body(request: Request) -> bytes:
    """The request body, gzip-decoded when sent so, refused (413) beyond max_upload_bytes."""
    limit = settings(request).max_upload_bytes
    too_big = ApiError(413, f"upload larger than the server's limit of {limit} bytes "
                            "(peakline serve --max-upload)")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        await discard_rest(request.stream(), int(declared))
        raise too_big
    encoding = request.headers.get("content-encoding", "identity").lower()
    if encoding not in ("identity", "gzip"):
        raise ApiError(415, f"unsupported Content-Encoding {encoding!r} (gzip or none)")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding == "gzip" else None
    chunks, size = [], 0
    stream = request.stream()
    try:
        async for chunk in stream:
            if inflater is not None:
                chunk = inflater.decompress(chunk, limit + 1 - size)
                if inflater.unconsumed_tail:
                    chunks.clear()
                    await discard_rest(stream)
                    raise too_big
            size += len(chunk)
            if size > limit:
                chunks.clear()
                await discard_rest(stream)
                raise too_big
            chunks.append(chunk)
        if inflater is not None:
            chunks.append(inflater.flush())
            if not inflater.eof:
                raise ApiError(400, "the gzip body is truncated")
    except zlib.error as error:
        raise ApiError(400, f"the body is not valid gzip: {error}") from None
    return b"".join(chunks)


# A refused upload's remaining bytes are read and dropped, up to this many, before the 413 is
# sent: a client still sending when the server answers and closes would get a broken pipe
# instead of the answer (`peakline push` would say it cannot reach the server). Beyond it the
# connection is closed as it is (a client sending that much past the limit is not ours).
DISCARD_LIMIT_BYTES = 256 << 20


async def discard_rest(stream: AsyncIterator[bytes], declared: int | None = None) -> None:
    """Reads what is left of a request body's stream and drops it (at most
    DISCARD_LIMIT_BYTES; nothing if the declared length is larger)."""
    if declared is not None and declared > DISCARD_LIMIT_BYTES:
        return
    dropped = 0
    async for chunk in stream:
        dropped += len(chunk)
        if dropped > DISCARD_LIMIT_BYTES:
            return


async def json_body(request: Request, *, source: str) -> Any:
    raw = await read_body(request)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, f"{source}: not UTF-8 text") from None
    if not text.strip():
        raise ApiError(400, f"{source}: empty body")
    try:
        return strict_json(text, source=source)
    except ProfileFormatError as error:
        raise ApiError(400, str(error)) from None


# ---- endpoints ----------------------------------------------------------------------------

async def health(request: Request) -> Response:
    return JSONResponse({"ok": True})


async def push_run(request: Request) -> Response:
    """POST /api/runs: {"upload_id", "model", "version", "metadata", "sources", "profile"}."""
    await require_token(request)
    body = await json_body(request, source="upload")
    if not isinstance(body, dict):
        raise ApiError(400, "upload: expected a JSON object with model, version, upload_id, "
                            "profile")
    model = check_name(body.get("model"))
    version = check_version(body.get("version"))
    upload_id = body.get("upload_id")
    if not isinstance(upload_id, str) or not UPLOAD_ID_PATTERN.fullmatch(upload_id):
        raise ApiError(400, "upload: upload_id must be 8 to 64 of letters, digits, '_', '-'")
    metadata = body.get("metadata") or {}
    sources = body.get("sources") or {}
    if not isinstance(metadata, dict):
        raise ApiError(400, "upload: metadata must be an object")
    if not isinstance(sources, dict) or len(sources) > MAX_SOURCE_FILES or \
            not all(isinstance(k, str) and isinstance(v, str) for k, v in sources.items()):
        raise ApiError(400, f"upload: sources must map file names to text (at most "
                            f"{MAX_SOURCE_FILES} files)")
    if "profile" not in body:
        raise ApiError(400, "upload: no profile")
    try:
        profile = Profile.from_dict(body["profile"], source="upload: profile")
    except ProfileFormatError as error:
        raise ApiError(422, str(error)) from None
    try:
        run, created = await run_in_threadpool(
            store.add_run, settings(request).engine, upload_id=upload_id, model=model,
            version=version, metadata=metadata, profile=profile, sources=sources)
    except UsageError as error:  # a stored budget that no longer reads
        raise ApiError(409, str(error)) from None
    return JSONResponse({"created": created, "run": run, **verdict_answer(run)},
                        status_code=201 if created else 200)


def verdict_answer(run: dict[str, Any]) -> dict[str, Any]:
    detail = run["verdict_detail"]
    return {"model": run["model"], "version": run["version"], "run_id": run["id"],
            "verdict": run["verdict"],
            "figures": {name: run[name] for name in ("peak_bytes", "peak_rss_bytes",
                                                     "gpu_peak_bytes", "cpu_s", "wall_s",
                                                     "exit_code")},
            "budgets": detail["budgets"], "reasons": detail["reasons"],
            "baseline": detail["baseline"], "notes": detail["notes"]}


@reader
async def model_verdict(request: Request) -> Response:
    name = check_name(request.path_params["name"])
    version = request.query_params.get("version")
    if version is not None:
        check_version(version)
    run = await run_in_threadpool(store.verdict_of, settings(request).engine, name, version)
    if run is None:
        raise ApiError(404, f"no run of model {name!r}" +
                       (f" at version {version!r}" if version else ""))
    return JSONResponse(verdict_answer(run))


@reader
async def list_models(request: Request) -> Response:
    models = await run_in_threadpool(store.overview, settings(request).engine)
    return JSONResponse({"models": [
        {"name": m["name"], "runs": m["runs"], "peaks": m["peaks"],
         "latest": verdict_answer(m["latest"]) if m["latest"] else None} for m in models]})


@reader
async def model_history(request: Request) -> Response:
    name = check_name(request.path_params["name"])
    limit = _int_query(request, "limit", store.HISTORY_LIMIT, 1, 10_000)
    engine = settings(request).engine
    runs = await run_in_threadpool(store.history, engine, name, limit)
    if not runs and not await run_in_threadpool(store.model_exists, engine, name):
        raise ApiError(404, f"no model {name!r}")
    budgets = await run_in_threadpool(store.budgets_of, engine, name)
    return JSONResponse({"model": name, "budgets": budgets, "runs": runs})


@reader
async def get_budgets(request: Request) -> Response:
    name = check_name(request.path_params["name"])
    budgets = await run_in_threadpool(store.budgets_of, settings(request).engine, name)
    return JSONResponse({"model": name, "budgets": budgets})


async def put_budgets(request: Request) -> Response:
    """PUT /api/models/{name}/budgets: {"max_peak": "2GiB", "max_cpu": null, ...}; a null
    removes a budget, names not given are kept."""
    await require_token(request)
    name = check_name(request.path_params["name"])
    body = await json_body(request, source="budgets")
    if not isinstance(body, dict):
        raise ApiError(400, "budgets: expected a JSON object of budget names and values")
    try:
        budgets = await run_in_threadpool(store.set_budgets, settings(request).engine, name,
                                          body)
    except UsageError as error:
        raise ApiError(400, str(error)) from None
    return JSONResponse({"model": name, "budgets": budgets})


@reader
async def get_run(request: Request) -> Response:
    return JSONResponse(await stored_run(request, store.run))


@reader
async def get_run_profile(request: Request) -> Response:
    stored = await stored_run(request, store.run_profile)
    return JSONResponse(stored[0].to_dict())


def plan_request(request: Request) -> dict[str, Any]:
    """The planner's query (``memory``, ``models``, optional ``gpu_memory``, ``trials``,
    ``seed``), checked; sizes as everywhere in peakline (``64GiB``, ``512M``)."""
    from peakline.gates.budgets import parse_size

    q = request.query_params
    if not q.get("memory"):
        raise ApiError(400, "plan: give memory=SIZE (e.g. 64GiB) and models=a,b,c")
    try:
        memory = parse_size(q["memory"])
        gpu = parse_size(q["gpu_memory"]) if q.get("gpu_memory") else None
    except (UsageError, ValueError) as error:
        raise ApiError(400, f"plan: {error}") from None
    names = [n.strip() for given in q.getlist("models") for n in given.split(",") if n.strip()]
    if not names:
        raise ApiError(400, "plan: give models=a,b,c")
    if len(names) > MAX_PLAN_MODELS or len(set(names)) != len(names):
        raise ApiError(400, f"plan: at most {MAX_PLAN_MODELS} models, each named once")
    for n in names:
        check_name(n)
    return {"memory": memory, "gpu": gpu, "names": names,
            "trials": _int_query(request, "trials", planner.DEFAULT_TRIALS, 10,
                                 planner.MAX_TRIALS),
            "seed": _int_query(request, "seed", planner.DEFAULT_SEED, 0, 2**32 - 1)}


def make_plan(engine: sa.Engine, query: dict[str, Any]) -> dict[str, Any]:
    found = store.latest_passing(engine, query["names"])
    missing = [n for n in query["names"] if n not in found]
    if missing:
        raise ApiError(404, f"plan: no passing run of {', '.join(missing)}")
    footprints = [planner.footprint_of(found[n]) for n in query["names"]]
    return planner.plan(footprints, query["memory"], gpu_memory_bytes=query["gpu"],
                        trials=query["trials"], seed=query["seed"])


@reader
async def get_plan(request: Request) -> Response:
    query = plan_request(request)
    return JSONResponse(await run_in_threadpool(make_plan, settings(request).engine, query))


def _int_query(request: Request, name: str, default: int, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ApiError(400, f"{name} must be a whole number, got {text!r}") from None
    if not low <= value <= high:
        raise ApiError(400, f"{name} must be between {low} and {high}")
    return value


async def stored_run(request: Request, fetch):
    """``fetch(engine, run_id)`` (store.run, store.run_profile) for the run the path names;
    404 when there is no such run."""
    run_id = request.path_params["run_id"]
    if 0 < run_id < 2**62:
        found = await run_in_threadpool(fetch, settings(request).engine, run_id)
        if found is not None:
            return found
    raise ApiError(404, f"no run {run_id}")


# ---- the application ----------------------------------------------------------------------

async def http_error(request: Request, exc: HTTPException) -> Response:
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))
    from peakline.server import ui
    return ui.error_page(request, exc.status_code, str(exc.detail))


async def peakline_error(request: Request, exc: PeaklineError) -> Response:
    return await http_error(request, ApiError(400, str(exc)))


API_ROUTES = [
    Route("/api/health", health),
    Route("/api/runs", push_run, methods=["POST"]),
    Route("/api/runs/{run_id:int}", get_run),
    Route("/api/runs/{run_id:int}/profile", get_run_profile),
    Route("/api/models", list_models),
    Route("/api/models/{name}", model_history),
    Route("/api/models/{name}/verdict", model_verdict),
    Route("/api/models/{name}/budgets", get_budgets, methods=["GET"]),
    Route("/api/models/{name}/budgets", put_budgets, methods=["PUT"]),
    Route("/api/plan", get_plan),
]


def create_app(engine: sa.Engine, *, max_upload_bytes: int = DEFAULT_MAX_UPLOAD_BYTES,
               auth_reads: bool = False) -> Starlette:
    from peakline.server import ui

    app = Starlette(routes=[*API_ROUTES, *ui.ROUTES],
                    exception_handlers={HTTPException: http_error,
                                        PeaklineError: peakline_error})
    app.state.settings = Settings(engine, max_upload_bytes, auth_reads)
    return app
