"""A pushed run judged on the server: against its model's budgets (the names and meaning of
`peakline check`, peakline.gates.budgets) and against the model's previous passing version
(the regression check of `peakline check --baseline`, with the model's ``tolerance``).

Source text comes only from what the client sent with the profile (reporters._source
``sources_from``): the paths a pushed profile names are never opened on the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from peakline.errors import UsageError
from peakline.gates import budgets as _budgets
from peakline.gates.budgets import IncomparableError
from peakline.gates.verdict import check_same_program, judge, show
from peakline.model.profile import Profile
from peakline.reporters._source import sources_from

# Budgets a model can have on the server: the judged ones and the regression tolerance
# (the baseline is always the previous passing version; one run per push).
SERVER_BUDGETS = (*_budgets.BUDGET_NAMES, "tolerance")


def convert_budgets(values: Mapping[str, Any], *, model: str) -> dict[str, Any]:
    """Text values (as stored) -> converted values; UsageError naming the bad one."""
    out = {}
    for name, value in values.items():
        if name not in SERVER_BUDGETS:
            raise UsageError(f"unknown budget {name!r} for model {model!r} (known: "
                             f"{', '.join(SERVER_BUDGETS)})")
        out[name] = _budgets.convert(name, value, source=f"budgets of {model!r}")
    return out


@dataclass
class Baseline:
    run_id: int
    version: str
    profile: Profile
    sources: Mapping[str, str]


def judge_run(profile: Profile, sources: Mapping[str, str], budget_text: Mapping[str, str],
              baseline: Baseline | None, *, model: str) -> dict[str, Any]:
    """The stored verdict: ``{"verdict", "budgets": [...], "reasons": [...], "baseline":
    {...} | None, "notes": [...]}`` (docs/server.md)."""
    budgets = convert_budgets(budget_text, model=model)
    notes: list[str] = []
    reasons: list[str] = []
    results: list[dict[str, Any]] = []
    base_profile = None
    if baseline is not None:
        try:
            check_same_program(profile.program, baseline.profile, f"version {baseline.version}")
            if profile.has_memory != baseline.profile.has_memory:
                raise IncomparableError("one of the two was profiled with --cpu-only")
            base_profile = baseline.profile
        except IncomparableError as error:
            notes.append(f"no regression check: {error}")
    # Judge budget by budget, so one that cannot be judged (a GPU budget, no GPU measured)
    # fails with its reason and the others are still judged.
    merged_sources = {**(baseline.sources if baseline else {}), **sources}
    with sources_from(merged_sources):
        for name in _budgets.BUDGET_NAMES:
            if name not in budgets or budgets[name] is False:
                continue
            try:
                verdict = judge([profile], {name: budgets[name]})
            except UsageError as error:
                results.append({"name": name, "limit": budgets[name], "measured": None,
                                "ok": False, "lines": [], "note": str(error)})
                reasons.append(f"{name}: cannot be judged: {error}")
                continue
            results.extend(r.to_dict() for r in verdict.results)
        if base_profile is not None:
            tolerance = budgets.get("tolerance", _budgets.DEFAULT_TOLERANCE_PCT)
            verdict = judge([profile], {"tolerance": tolerance}, baseline=base_profile)
            results.extend(r.to_dict() for r in verdict.results)
    for result in results:
        if not result["ok"] and result["measured"] is not None:
            reasons.append(f"{result['name']}: {show(result['name'], result['measured'])} > "
                           f"allowed {show(result['name'], result['limit'])}"
                           + (f" ({result['note']})" if result.get("note") else ""))
    if profile.exit_code not in (0, None):
        reasons.append(f"the program exited with status {profile.exit_code}")
    return {"verdict": "fail" if reasons else "pass", "budgets": results, "reasons": reasons,
            "baseline": ({"run_id": baseline.run_id, "version": baseline.version}
                         if base_profile is not None and baseline is not None else None),
            "notes": notes}
