"""The report's charts, as Vega-Lite specifications built with Altair.

Vega-Lite because one specification serves both outputs a researcher needs: an interactive
chart in the browser (tooltips, zoom) and a static PNG/SVG rendered without a browser by
`vl-convert` (for papers and PR comments). Every mark that a person counts carries an
accessible description (`aria-label`), which is also how the tests count them.
"""

from __future__ import annotations

from typing import Any

import altair as alt

from evoteam.report.data import RunReport, rank_key

WIDTH, HEIGHT = 640, 300


def _records(items) -> list[dict[str, Any]]:
    return [i.model_dump(mode="json") for i in items]


def _with_data(spec: dict[str, Any], **datasets: list[dict[str, Any]]) -> dict[str, Any]:
    # Large series go in as named datasets after Altair has built the spec: Altair walks every
    # inline value, which for a year-long run (thousands of candidates) costs seconds.
    spec.setdefault("datasets", {}).update(datasets)
    return spec


def _domain(values: list[float], floor: float | None = None) -> list[float]:
    """A scale's domain around `values` with room on both sides, so that a single value (one
    candidate, one version) sits inside labelled ticks instead of on a collapsed axis."""
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 if hi > lo else max(abs(lo) * 0.05, 0.05)
    lo, hi = lo - pad, hi + pad
    if floor is not None:
        lo = max(lo, floor)
    return [lo, hi]


def _version_label(version: int | None) -> str:
    return "no team" if version is None else f"v{version}"


def progress(report: RunReport) -> dict[str, Any] | None:
    """Score against cumulative spend (or, when nothing was spent, against the order the
    candidates were recorded in): every ranked candidate, the running best as a step line, a
    diamond where the supervisor restructured the team (hover: version, roles, diagnosis).
    None when no candidate has a score to draw."""
    shown = [c for c in report.candidates if c.status == "PASSED" and c.score is not None and c.split == "dev"]
    if not shown:
        return None
    by_spend = any(c.spent_usd > 0 for c in report.candidates)
    order = {c.id: i + 1 for i, c in enumerate(report.candidates)}
    rows = [{**c.model_dump(mode="json"), "x": c.spent_usd if by_spend else order[c.id],
             "version": _version_label(c.team_version),
             "label": f"candidate {c.id} {_version_label(c.team_version)} {c.role or ''}".strip(),
             "kind": "flagged (not ranked)" if c.flagged else "passed" if c.verified else "self-reported (not ranked)"}
            for c in shown]
    marks = []
    for v in report.interventions:
        if v.best_before is None:
            continue
        before = sum(1 for c in report.candidates if c.at <= v.at)
        marks.append({"version": v.version, "x": v.spent_usd if by_spend else before + 0.5, "best": v.best_before,
                      "roles": ", ".join(v.roles), "diagnosis": v.diagnosis[:300],
                      "label": f"intervention v{v.version}"})
    xs = [r["x"] for r in rows] + [m["x"] for m in marks]
    ys = [r["score"] for r in rows] + [m["best"] for m in marks]
    x_title = "cumulative spend (USD)" if by_spend else "candidate, in the order recorded (no spend recorded)"
    # Candidate numbers get half a step on each side, so the first and last sit on labelled ticks.
    x_domain = _domain(xs, floor=0) if by_spend else [0.5, max(xs) + 0.5]
    x = alt.X("x:Q", title=x_title, scale=alt.Scale(domain=x_domain, nice=False),
              axis=alt.Axis() if by_spend else alt.Axis(format="d", values=list(range(1, int(max(xs)) + 1)))
              if max(xs) <= 20 else alt.Axis(format="d", tickMinStep=1))
    y_scale = alt.Scale(domain=_domain(ys), nice=False, zero=False)
    base_points = alt.Chart(alt.NamedData("points")).mark_circle(size=60, opacity=0.7).encode(
        x=x, y=alt.Y("score:Q", title="score", scale=y_scale),
        color=alt.Color("version:N", title="team version"),
        shape=alt.Shape("kind:N", title="candidate"),
        description="label:N",
        tooltip=["id:N", "score:Q", "version:N", "role:N", "spent_usd:Q", "at:T"])
    best = alt.Chart(alt.NamedData("best")).mark_line(
        interpolate="step-after", color="black").encode(x=x, y=alt.Y("best_so_far:Q", scale=y_scale))
    layers = [base_points, best]
    if marks:
        layers.append(alt.Chart(alt.NamedData("interventions")).mark_point(
            shape="diamond", size=160, filled=True, color="#d62728").encode(
            x=x, y=alt.Y("best:Q", scale=y_scale), description="label:N",
            tooltip=["version:O", "roles:N", "diagnosis:N", "x:Q", "best:Q"]))
    title = "Score vs cumulative spend" if by_spend else "Score of each candidate"
    spec = alt.layer(*layers).properties(
        width=WIDTH, height=HEIGHT, title=title + (" (◆ = team redesigned)" if marks else "")).to_dict(validate=False)
    return _with_data(spec, points=rows, best=[r for r in rows if r["best_so_far"] is not None],
                      interventions=marks)


def versions(report: RunReport) -> dict[str, Any] | None:
    """One point per team version (its best dev score), with the running best as a step line.
    None unless two versions have scores: one version is a row of the timeline table."""
    rows, best = [], None
    points = {c.id: c for c in report.candidates}
    for v in report.versions:
        # The running best as every ranking names it (rank_score, the pessimistic end), not the raw
        # score: a noisier 0.44 read as the best beside a header naming a steady 0.45 (review 2026-12-04).
        own = points.get(v.best_candidate_id or "")
        if own is not None and (best is None or rank_key(own, report.direction) > rank_key(best, report.direction)):
            best = own
        rows.append({"version": v.version, "score": v.best_of_version, "running_best": best.score if best else None,
                     "roles": ", ".join(v.roles), "label": f"version v{v.version}"})
    scored = [r for r in rows if r["score"] is not None]
    if len(scored) < 2:
        return None
    x = alt.X("version:Q", title="team version", axis=alt.Axis(tickMinStep=1, format="d"),
              scale=alt.Scale(domain=_domain([r["version"] for r in rows], floor=0), nice=False))
    y_scale = alt.Scale(domain=_domain([r["score"] for r in scored]), nice=False, zero=False)
    points = alt.Chart(alt.NamedData("version_points")).mark_point(
        filled=True, size=80).encode(x=x, y=alt.Y("score:Q", title="best dev score", scale=y_scale),
                                     description="label:N", tooltip=["version:Q", "score:Q", "roles:N"])
    line = alt.Chart(alt.NamedData("version_best")).mark_line(
        interpolate="step-after", color="black").encode(x=x, y=alt.Y("running_best:Q", scale=y_scale))
    spec = alt.layer(points, line).properties(width=WIDTH, height=220,
                                              title="Best score of each team version").to_dict(validate=False)
    return _with_data(spec, version_points=scored,
                      version_best=[r for r in rows if r["running_best"] is not None])


def workloads(report: RunReport) -> dict[str, Any] | None:
    """Per-workload speedups of the best candidate (kernel kits), against 1.0x (the baseline),
    one labelled row per workload."""
    rows = [{"workload": w.workload, "speedup": w.speedup, "label": f"workload {w.workload}"}
            for w in report.best_workloads if w.speedup]
    if not rows:
        return None
    speedups = [r["speedup"] for r in rows] + [1.0]
    lo, hi = min(speedups), max(speedups)
    x_scale = alt.Scale(type="log", domain=[lo / 1.25, hi * 1.25], nice=False)
    x = alt.X("speedup:Q", title="speedup over the baseline (log scale; 1 = as fast)", scale=x_scale)
    dots = alt.Chart(alt.Data(values=rows)).mark_circle(size=70).encode(
        x=x, y=alt.Y("workload:N", title="workload", sort=None), description="label:N",
        tooltip=["workload:N", "speedup:Q"])
    rule = alt.Chart(alt.Data(values=[{"x": 1.0, "label": "baseline 1.0×"}])).mark_rule(
        color="#888", strokeDash=[4, 4]).encode(x=alt.X("x:Q", scale=x_scale), tooltip=["label:N"])
    return alt.layer(rule, dots).properties(
        width=WIDTH, height=max(60, 22 * len(rows)),
        title=f"Per-workload speedup of {report.best_candidate_id}").to_dict(validate=False)


def spend(report: RunReport) -> dict[str, Any] | None:
    """Spend by role and by team version, side by side."""
    def bars(slices, title):
        return alt.Chart(alt.Data(values=_records(slices))).mark_bar().encode(
            x=alt.X("usd:Q", title="USD"), y=alt.Y("label:N", sort="-x", title=None),
            tooltip=["label:N", "usd:Q"]).properties(width=WIDTH // 2 - 40, title=title)
    if not report.spend_by_role and not report.spend_by_version:
        return None
    return alt.hconcat(bars(report.spend_by_role, "Spend by role"),
                       bars(report.spend_by_version, "Spend by team version")).to_dict(validate=False)


def retrieval(report: RunReport) -> dict[str, Any] | None:
    """Gate decisions over time, and predicted vs realised scores (Spearman ρ in the title)."""
    r = report.retrieval
    if not r.gates and not r.pairs:
        return None
    gates = alt.Chart(alt.NamedData("gates")).mark_tick(thickness=2, size=20).encode(
        x=alt.X("at:T", title="time"), y=alt.Y("decision:N", title=None), color="decision:N",
        tooltip=["at:T", "decision:N"]).properties(width=WIDTH // 2 - 40, title="Gate decisions")
    rho = "n/a" if r.spearman is None else f"{r.spearman:.2f}"
    pairs = alt.Chart(alt.NamedData("pairs")).mark_circle(size=50).encode(
        x=alt.X("predicted:Q", scale=alt.Scale(zero=False)), y=alt.Y("realised:Q", scale=alt.Scale(zero=False)),
        tooltip=["predicted:Q", "realised:Q"]).properties(
        width=WIDTH // 2 - 40, title=f"Predicted vs realised (Spearman ρ = {rho})")
    spec = alt.hconcat(gates, pairs).resolve_scale(color="independent").to_dict(validate=False)
    return _with_data(spec, gates=_records(r.gates), pairs=_records(r.pairs))


def compare_progress(reports: list[RunReport]) -> dict[str, Any]:
    """Several runs' running best against cumulative spend on one chart."""
    rows = []
    for rep in reports:
        for c in rep.candidates:
            if c.best_so_far is not None:
                rows.append({"run": f"{rep.run.id}", "spent_usd": c.spent_usd, "best": c.best_so_far,
                             "label": f"run {rep.run.id}"})
    spec = alt.Chart(alt.NamedData("progress")).mark_line(interpolate="step-after", point=True).encode(
        x=alt.X("spent_usd:Q", title="cumulative spend (USD)"),
        y=alt.Y("best:Q", title="best score so far", scale=alt.Scale(zero=False)),
        color=alt.Color("run:N"), description="label:N", tooltip=["run:N", "spent_usd:Q", "best:Q"],
    ).properties(width=WIDTH, height=HEIGHT, title="Progress against spend").to_dict(validate=False)
    return _with_data(spec, progress=rows)


def compare_workloads(reports: list[RunReport]) -> dict[str, Any] | None:
    rows = [{"run": rep.run.id, "workload": w.workload, "speedup": w.speedup}
            for rep in reports for w in rep.best_workloads if w.speedup]
    if not rows:
        return None
    return alt.Chart(alt.Data(values=rows)).mark_bar().encode(
        x=alt.X("speedup:Q", title="speedup of each run's best"), y=alt.Y("workload:N", title=None),
        yOffset="run:N", color="run:N", tooltip=["run:N", "workload:N", "speedup:Q"],
    ).properties(width=WIDTH, title="Best candidate per workload").to_dict(validate=False)
