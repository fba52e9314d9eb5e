"""The web UI: pages rendered on the server from Jinja2 templates (templates/), with charts
drawn here as inline SVG. No script and nothing fetched from elsewhere, so the pages work
offline and behind any firewall. A run's full report is the HTML reporter's page
(peakline.reporters.html), rendered from the stored profile and the source sent with it.
"""

from __future__ import annotations

import html
import os
import urllib.parse
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from peakline.errors import UsageError
from peakline.reporters._format import human_bytes
from peakline.server import app as api
from peakline.server import store
from peakline.server.judging import SERVER_BUDGETS

_env = Environment(loader=FileSystemLoader(os.path.join(os.path.dirname(__file__), "templates")),
                   autoescape=select_autoescape(["html"]))
_env.filters["bytes"] = lambda v: "-" if v is None else human_bytes(v)
_env.filters["seconds"] = lambda v: "-" if v is None else f"{v:.2f} s"
_env.filters["percent"] = lambda v: f"{100.0 * v:.1f}%"
_env.filters["quote"] = lambda v: urllib.parse.quote(str(v), safe="")


# The pages run no script and load nothing; the report page runs only its own inline script.
# Either way a pushed profile's text can neither run code nor make the browser fetch anything.
PAGE_POLICY = ("default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
               "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
REPORT_POLICY = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                 "img-src data: blob:; font-src data:; base-uri 'none'; frame-ancestors 'none'")


def page(template: str, http_status: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(_env.get_template(template).render(**context), status_code=http_status,
                        headers={"Content-Security-Policy": PAGE_POLICY})


def error_page(request: Request, status_code: int, message: str) -> Response:
    return page("error.html", status_code, title=f"Error {status_code}", message=message)


# ---- charts -------------------------------------------------------------------------------

def sparkline(values: list[float | None], width: int = 120, height: int = 28) -> Markup:
    points = [v for v in values if v is not None]
    if len(points) < 2:
        return Markup("")
    top, bottom = max(points), min(points)
    span = (top - bottom) or 1.0
    step = width / (len(points) - 1)
    coords = " ".join(f"{i * step:.1f},{height - 2 - (v - bottom) / span * (height - 4):.1f}"
                      for i, v in enumerate(points))
    return Markup(f'<svg class="spark" width="{width}" height="{height}" role="img" '
                  f'aria-label="peak trend"><polyline points="{coords}" fill="none" '
                  f'stroke="#2563eb" stroke-width="1.5"/></svg>')


def line_chart(series: list[tuple[str, str, list[float | None]]], limits: list[tuple[str, float]],
               labels: list[str], fmt, *, width: int = 860, height: int = 220) -> Markup:
    """Series (name, colour, values per run) and horizontal budget lines (name, value)."""
    values = [v for _, _, vs in series for v in vs if v is not None] + [v for _, v in limits]
    if not values or not labels:
        return Markup('<p class="muted">no figures yet</p>')
    left, right, top, bottom = 70, 10, 10, 24
    high = max(values) * 1.1 or 1.0
    inner_w, inner_h = width - left - right, height - top - bottom
    n = len(labels)

    def x(i: int) -> float:
        return left + (inner_w * i / (n - 1) if n > 1 else inner_w / 2)

    def y(v: float) -> float:
        return top + inner_h - v / high * inner_h

    out = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img">',
           f'<line x1="{left}" y1="{top + inner_h}" x2="{width - right}" y2="{top + inner_h}" '
           f'stroke="#999"/>',
           f'<text x="{left - 6}" y="{top + 10}" text-anchor="end">{html.escape(fmt(high))}'
           f'</text><text x="{left - 6}" y="{top + inner_h}" text-anchor="end">0</text>']
    for name, value in limits:
        out.append(f'<line class="budget" x1="{left}" y1="{y(value):.1f}" x2="{width - right}" '
                   f'y2="{y(value):.1f}" stroke="#dc2626" stroke-dasharray="6 4"/>'
                   f'<text x="{width - right - 4}" y="{y(value) - 4:.1f}" text-anchor="end" '
                   f'fill="#dc2626">{html.escape(name)} {html.escape(fmt(value))}</text>')
    for name, colour, vs in series:
        pts = [(x(i), y(v)) for i, v in enumerate(vs) if v is not None]
        if pts:
            out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="'
                       + " ".join(f"{px:.1f},{py:.1f}" for px, py in pts) + '"/>')
            out.extend(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" fill="{colour}"/>'
                       for px, py in pts[-60:])
    shown = max(1, n // 12)
    for i, label in enumerate(labels):
        if i % shown == 0 or i == n - 1:
            out.append(f'<text x="{x(i):.1f}" y="{height - 6}" text-anchor="middle">'
                       f'{html.escape(label[:14])}</text>')
    legend = "".join(f'<span style="color:{c}">&#9632; {html.escape(nm)}</span> '
                     for nm, c, _ in series)
    out.append("</svg>")
    return Markup(f'<div class="legend">{legend}</div>' + "".join(out))


def histogram(plan: dict[str, Any], width: int = 860, height: int = 200) -> Markup:
    hist = plan["estimate"]["histogram"]
    counts, edges = hist["counts"], hist["edges_bytes"]
    memory = plan["memory_bytes"]
    low, high = min(edges[0], memory), max(edges[-1], memory, plan["worst_case_bytes"])
    span = (high - low) or 1.0
    left, inner_w, inner_h = 10, width - 20, height - 40
    top_count = max(counts) or 1

    def x(v: float) -> float:
        return left + (v - low) / span * inner_w

    out = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img">']
    for count, a, b in zip(counts, edges, edges[1:]):
        h = count / top_count * inner_h
        colour = "#dc2626" if b > memory else "#2563eb"
        out.append(f'<rect x="{x(a):.1f}" y="{10 + inner_h - h:.1f}" '
                   f'width="{max(1.0, x(b) - x(a) - 1):.1f}" height="{h:.1f}" fill="{colour}"/>')
    for value, label, colour in ((memory, "machine", "#111"),
                                 (plan["worst_case_bytes"], "worst case", "#dc2626")):
        out.append(f'<line x1="{x(value):.1f}" y1="10" x2="{x(value):.1f}" '
                   f'y2="{10 + inner_h}" stroke="{colour}" stroke-dasharray="4 3"/>'
                   f'<text x="{x(value):.1f}" y="{height - 8}" text-anchor="middle">'
                   f'{html.escape(label)} {html.escape(human_bytes(value))}</text>')
    out.append("</svg>")
    return Markup("".join(out))


# ---- pages --------------------------------------------------------------------------------

def _engine(request: Request):
    return api.settings(request).engine


async def _reads_allowed(request: Request) -> None:
    if api.settings(request).auth_reads:
        await api.require_token(request)


async def index(request: Request) -> Response:
    await _reads_allowed(request)
    models = await run_in_threadpool(store.overview, _engine(request))
    for m in models:
        m["spark"] = sparkline(m["peaks"])
    return page("index.html", title="Models", models=models)


async def model_page(request: Request) -> Response:
    await _reads_allowed(request)
    name = api.check_name(request.path_params["name"])
    engine = _engine(request)
    runs = await run_in_threadpool(store.history, engine, name, store.HISTORY_LIMIT)
    if not runs and not await run_in_threadpool(store.model_exists, engine, name):
        raise api.ApiError(404, f"no model {name!r}")
    budgets = await run_in_threadpool(store.budgets_of, engine, name)
    from peakline.gates.budgets import convert

    limits = {k: convert(k, v, source="budgets") for k, v in budgets.items()}
    labels = [r["version"] for r in runs]
    memory_chart = line_chart(
        [("heap peak", "#2563eb", [r["peak_bytes"] for r in runs]),
         ("peak RSS", "#d97706", [r["peak_rss_bytes"] for r in runs])],
        [(n, limits[n]) for n in ("max_peak", "max_rss") if n in limits],
        labels, human_bytes)
    cpu_chart = line_chart([("CPU time", "#059669", [r["cpu_s"] for r in runs])],
                           [(n, limits[n]) for n in ("max_cpu",) if n in limits],
                           labels, lambda v: f"{v:.2f} s")
    return page("model.html", title=name, name=name, runs=list(reversed(runs)),
                budgets=budgets, budget_names=SERVER_BUDGETS, memory_chart=memory_chart,
                cpu_chart=cpu_chart, message=request.query_params.get("message"))


async def set_budgets_form(request: Request) -> Response:
    name = api.check_name(request.path_params["name"])
    raw = await api.read_body(request)
    form = {k: v[-1] for k, v in urllib.parse.parse_qs(raw.decode("utf-8", "replace"),
                                                       keep_blank_values=True).items()}
    await api.require_token(request, form.pop("token", "").strip() or None)
    values = {k: (v.strip() or None) for k, v in form.items() if k in SERVER_BUDGETS}
    try:
        await run_in_threadpool(store.set_budgets, _engine(request), name, values)
    except UsageError as error:
        raise api.ApiError(400, str(error)) from None
    return RedirectResponse(f"/models/{urllib.parse.quote(name)}?message=budgets+saved",
                            status_code=303)


async def run_page(request: Request) -> Response:
    await _reads_allowed(request)
    run = await api.stored_run(request, store.run)
    return page("run.html", title=f"{run['model']} {run['version']}", run=run,
                answer=api.verdict_answer(run))


async def run_report(request: Request) -> Response:
    await _reads_allowed(request)
    stored = await api.stored_run(request, store.run_profile)
    return HTMLResponse(await run_in_threadpool(_report_html, *stored),
                        headers={"Content-Security-Policy": REPORT_POLICY})


def _report_html(profile, sources) -> str:
    import io

    from peakline.reporters import html as html_report
    from peakline.reporters._source import sources_from

    stream = io.StringIO()
    with sources_from(sources):
        html_report.render(profile, stream)
    return stream.getvalue()


async def plan_page(request: Request) -> Response:
    await _reads_allowed(request)
    engine = _engine(request)
    models = await run_in_threadpool(store.overview, engine)
    chosen = [n for given in request.query_params.getlist("models") for n in given.split(",")
              if n]
    result, error = None, None
    if request.query_params.get("memory"):
        try:
            query = api.plan_request(request)
            result = await run_in_threadpool(api.make_plan, engine, query)
        except api.ApiError as exc:
            error = exc.detail
    return page("plan.html", title="Co-location planner", models=models, chosen=chosen,
                memory=request.query_params.get("memory", "64GiB"),
                gpu_memory=request.query_params.get("gpu_memory", ""), result=result,
                error=error, chart=histogram(result) if result else None)


ROUTES = [
    Route("/", index),
    Route("/models/{name}", model_page),
    Route("/models/{name}/budgets", set_budgets_form, methods=["POST"]),
    Route("/runs/{run_id:int}", run_page),
    Route("/runs/{run_id:int}/report", run_report),
    Route("/plan", plan_page),
]
