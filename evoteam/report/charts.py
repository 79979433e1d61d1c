"""The report's charts, as Vega-Lite specifications built with Altair.

Vega-Lite because one specification serves both outputs a researcher needs: an interactive
chart in the browser (tooltips, zoom) and a static PNG/SVG rendered without a browser by
`vl-convert` (for papers and PR comments). Every mark that a person counts carries an
accessible description (`aria-label`), which is also how the tests count them.
"""

from __future__ import annotations

from typing import Any

import altair as alt

from evoteam.report.data import RunReport

WIDTH, HEIGHT = 640, 300


def _records(items) -> list[dict[str, Any]]:
    return [i.model_dump(mode="json") for i in items]


def _with_data(spec: dict[str, Any], **datasets: list[dict[str, Any]]) -> dict[str, Any]:
    # Large series go in as named datasets after Altair has built the spec: Altair walks every
    # inline value, which for a year-long run (thousands of candidates) costs seconds.
    spec.setdefault("datasets", {}).update(datasets)
    return spec


def progress(report: RunReport) -> dict[str, Any]:
    """Score against cumulative spend: every ranked candidate, the running best as a step line,
    a diamond where the supervisor restructured the team (hover: version, roles, diagnosis)."""
    shown = [c for c in report.candidates if c.status == "PASSED" and c.score is not None and c.split != "heldout"]
    rows = [{**c.model_dump(mode="json"), "label": f"candidate {c.id} v{c.team_version} {c.role or ''}",
             "kind": "flagged (not ranked)" if c.flagged else "passed" if c.verified else "self-reported (not ranked)"}
            for c in shown]
    marks = [{"version": v.version, "spent_usd": v.spent_usd, "best": v.best_before,
              "roles": ", ".join(v.roles), "diagnosis": v.diagnosis[:300],
              "label": f"intervention v{v.version}"}
             for v in report.interventions if v.best_before is not None]
    x = alt.X("spent_usd:Q", title="cumulative spend (USD)")
    base_points = alt.Chart(alt.NamedData("points")).mark_circle(size=40, opacity=0.6).encode(
        x=x, y=alt.Y("score:Q", title="score", scale=alt.Scale(zero=False)),
        color=alt.Color("team_version:O", title="team version"),
        shape=alt.Shape("kind:N", title=None),
        description="label:N",
        tooltip=["id:N", "score:Q", "team_version:O", "role:N", "spent_usd:Q", "at:T"])
    best = alt.Chart(alt.NamedData("best")).mark_line(
        interpolate="step-after", color="black").encode(x=x, y="best_so_far:Q")
    layers = [base_points, best]
    if marks:
        layers.append(alt.Chart(alt.NamedData("interventions")).mark_point(
            shape="diamond", size=160, filled=True, color="#d62728").encode(
            x=x, y="best:Q", description="label:N",
            tooltip=["version:O", "roles:N", "diagnosis:N", "spent_usd:Q", "best:Q"]))
    spec = alt.layer(*layers).properties(
        width=WIDTH, height=HEIGHT, title="Score vs cumulative spend (◆ = team redesigned)").to_dict(validate=False)
    return _with_data(spec, points=rows, best=[r for r in rows if r["best_so_far"] is not None],
                      interventions=marks)


def versions(report: RunReport) -> dict[str, Any]:
    """One point per team version (its best dev score), with the running best as a step line."""
    rows, best = [], None
    better = (lambda a, b: a > b) if report.direction == "maximize" else (lambda a, b: a < b)
    for v in report.versions:
        if v.best_of_version is not None and (best is None or better(v.best_of_version, best)):
            best = v.best_of_version
        rows.append({"version": v.version, "score": v.best_of_version, "running_best": best,
                     "roles": ", ".join(v.roles), "label": f"version v{v.version}"})
    x = alt.X("version:Q", title="team version", axis=alt.Axis(tickMinStep=1))
    points = alt.Chart(alt.NamedData("version_points")).mark_point(
        filled=True, size=80).encode(x=x, y=alt.Y("score:Q", title="best dev score", scale=alt.Scale(zero=False)),
                                     description="label:N", tooltip=["version:Q", "score:Q", "roles:N"])
    line = alt.Chart(alt.NamedData("version_best")).mark_line(
        interpolate="step-after", color="black").encode(x=x, y="running_best:Q")
    spec = alt.layer(points, line).properties(width=WIDTH, height=220,
                                              title="Best score of each team version").to_dict(validate=False)
    return _with_data(spec, version_points=[r for r in rows if r["score"] is not None],
                      version_best=[r for r in rows if r["running_best"] is not None])


def workloads(report: RunReport) -> dict[str, Any] | None:
    """Per-workload speedups of the best candidate (kernel kits), against 1.0x (the baseline)."""
    rows = [{"workload": w.workload, "speedup": w.speedup, "label": f"workload {w.workload}"}
            for w in report.best_workloads if w.speedup]
    if not rows:
        return None
    dots = alt.Chart(alt.Data(values=rows)).mark_circle(size=70).encode(
        x=alt.X("speedup:Q", title="speedup over baseline (log)", scale=alt.Scale(type="log")),
        y=alt.value(HEIGHT / 4), yOffset=alt.YOffset("workload:N"), description="label:N",
        tooltip=["workload:N", "speedup:Q"])
    rule = alt.Chart(alt.Data(values=[{"x": 1.0, "label": "baseline 1.0×"}])).mark_rule(
        color="#888", strokeDash=[4, 4]).encode(x="x:Q", tooltip=["label:N"])
    return alt.layer(rule, dots).properties(
        width=WIDTH, height=HEIGHT // 2, title=f"Per-workload speedup of {report.best_candidate_id}").to_dict(validate=False)


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
