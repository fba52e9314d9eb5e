"""The validation server's web UI in a real headless Chromium (Debian's chromium driven by
Playwright, as test_html.py does): every page loads, links lead where they say, the budget
form saves, the planner answers, no console errors and no request leaves the server.
Screenshots go to $PEAKLINE_TEST_ARTIFACTS (default tests/artifacts/); docs/server.md shows
copies of them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import CHROMIUM
from server_helpers import MiB, InProcessServer, envelope, profile_dict

pytest.importorskip("starlette", reason="needs the server extra: pip install 'peakline[server]'")

ARTIFACTS = Path(os.environ.get("PEAKLINE_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[1] / "artifacts"))


def pulse(wall_s: float, base: int, top: int, start: float, end: float) -> list:
    return [[0.0, base], [start * wall_s, top], [end * wall_s, base], [wall_s, base]]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    from peakline.model.profile import Profile
    from peakline.server import store

    folder = tmp_path_factory.mktemp("ui")
    with InProcessServer(f"sqlite:///{folder}/ui.db") as server:
        engine = server.engine
        store.set_budgets(engine, "resnet50", {"max_peak": "1.2GiB", "max_rss": "1.5GiB",
                                               "max_cpu": "3s"})
        store.set_budgets(engine, "whisper-small", {"max_cpu": "0.85s"})
        history = {
            "resnet50": [(0.90, 2.1), (0.95, 2.2), (1.00, 2.4), (1.30, 2.3), (1.05, 2.5)],
            "bert-base": [(0.60, 1.2), (0.62, 1.1), (0.65, 1.3)],
            "whisper-small": [(0.40, 0.8), (0.45, 0.9)],
        }
        shapes = {"resnet50": (0.1, 0.4), "bert-base": (0.3, 0.6), "whisper-small": (0.5, 0.9)}
        for model, versions in history.items():
            for i, (gib, cpu) in enumerate(versions, start=1):
                peak = int(gib * 1024) * MiB
                start, end = shapes[model]
                data = envelope(model, f"1.{i}", profile_dict(
                    peak=peak, rss=peak + 150 * MiB, cpu_s=cpu, wall_s=10.0,
                    timeline=pulse(10.0, peak // 4, peak, start, end)))
                store.add_run(engine, upload_id=data["upload_id"], model=model,
                              version=data["version"], metadata=data["metadata"],
                              profile=Profile.from_dict(data["profile"]),
                              sources=data["sources"])
        token = store.create_token(engine, "ui")
        yield server.base, token



def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_the_ui_in_chromium(browser, site):
    base, token = site
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: problems.append(f"network: {r.url}")
            if not r.url.startswith((base, "data:")) else None)

    # models: latest verdict and a sparkline per model
    page.goto(base + "/")
    rows = page.locator("#models tr")
    assert rows.count() == 4
    assert rows.nth(1).inner_text().split("\t")[:4] == ["bert-base", "3", "1.3", "pass"]
    assert rows.filter(has_text="resnet50").locator("td.pass").count() == 1
    assert rows.filter(has_text="whisper-small").locator("td.fail").count() == 1  # CPU 0.9 s
    assert page.locator("svg.spark").count() == 3
    shoot(page, "server-models")

    # a model's history against its budget lines
    page.click("text=resnet50")
    assert page.url == base + "/models/resnet50"
    assert page.locator("svg.chart").count() == 2
    assert page.locator("line.budget").count() == 3  # max_peak, max_rss; max_cpu
    assert page.locator("#runs tr").count() == 6
    verdicts = page.locator("#runs td.fail, #runs td.pass").all_inner_texts()
    # newest first: 1.30 GiB > max_peak 1.2 GiB at version 1.4; version 1.5 is compared
    # with 1.3, the previous passing one (1.05 GiB, +5 %: within the 10 % tolerance)
    assert verdicts == ["pass", "fail", "pass", "pass", "pass"]
    shoot(page, "server-model")

    # budgets saved from the form (with a token), refused without one
    page.fill("#b-max_peak", "2GiB")
    page.fill("#token", token)
    page.click("#budgets button")
    assert "budgets saved" in page.inner_text("p.notice")
    assert page.input_value("#b-max_peak") == "2GiB"

    # a run, then its full report (the HTML reporter's page)
    page.click("#runs a[href='/runs/4']")
    assert page.inner_text("#verdict") == "fail"
    assert page.inner_text("#reasons").startswith("max_peak: 1.3 GiB > allowed 1.2 GiB")
    shoot(page, "server-run")
    page.click("#report-link")
    page.wait_for_load_state("load")
    assert "peakline" in page.title() and "model.py" in page.title()
    assert page.locator("text=the model's weights").count() >= 1  # the source sent by push

    # the planner
    page.goto(base + "/plan")
    for name in ("resnet50", "bert-base", "whisper-small"):
        page.check(f"input[value='{name}']")
    page.fill("#memory", "2.2GiB")  # worst case 2.55 GiB
    page.click("#plan-form button")
    verdict = page.inner_text("#plan-verdict")
    assert verdict.startswith("May exceed the machine"), verdict
    assert page.locator("#collisions tr").count() >= 2
    assert page.locator("svg.chart rect").count() >= 1
    shoot(page, "server-planner")

    page.goto(base + "/models/no-such-model")
    assert "no model 'no-such-model'" in page.inner_text("p.error")
    page.close()
    assert not [p for p in problems if "404" not in p], problems
