"""One self-contained HTML page per report: the charts' specifications and the Vega libraries
inline (no network at view time), every text from the store escaped."""

from __future__ import annotations

import contextlib
import functools
import html
import json
import os
from pathlib import Path
from typing import Any

from evoteam.report import charts
from evoteam.report.data import RunReport
from evoteam.report.summary import gain_text
from evoteam.stats import describe_score


@functools.cache
def _vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script (they put vegaEmbed/vega/vegaLite on window).
    Bundling takes seconds, so the result is kept in the user's cache, per vl-convert version."""
    import vl_convert

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evoteam"
    path = cache / f"vega-bundle-{vl_convert.__version__}.js"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        pass
    # "</script" cannot occur inside it unescaped, but guard so the page cannot be broken.
    bundle = vl_convert.javascript_bundle().replace("</script", "<\\/script")
    with contextlib.suppress(OSError):
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(bundle, encoding="utf-8")
        tmp.replace(path)
    return bundle


def _json_for_script(value: Any) -> str:
    # Inside a <script> element, "</script" ends it and "<!--<script" makes the parser skip the
    # real end: no "<", ">" or "&" appears raw (JSON's \\u escapes read back the same).
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; } td, th { padding: 3px 10px; border-bottom: 1px solid #eee;
text-align: left; vertical-align: top; } .num { text-align: right; font-variant-numeric: tabular-nums; }
.muted { color: #777; } .chart { margin: 1em 0; }
"""


def _fmt(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}g}"


def _summary(report: RunReport) -> str:
    run = report.run
    rows = [
        ("goal", html.escape(run.goal[:500])), ("kit", html.escape(run.kit or "—")),
        ("direction", run.direction), ("status", html.escape(run.status)),
        ("spent / budget", f"${run.spent_usd:.2f} / " + ("—" if run.budget_usd is None else f"${run.budget_usd:.2f}")),
        # Seven digits: a leaderboard's best known moves in the sixth (2.635983 read 2.636).
        ("x0 / best known", f"{_fmt(run.x0, 7)} / {_fmt(run.best_known, 7)}"),
        ("best dev score", f"{html.escape(describe_score(run.best_score, run.best_interval, runs=run.best_runs, exact=run.best_exact))} "
                           f"<span class=muted>({html.escape(report.best_candidate_id or '—')})</span>"),
        ("best held-out score", f"{html.escape(describe_score(report.best_heldout, report.best_heldout_interval))} "
                                f"<span class=muted>({html.escape(report.best_heldout_id or '—')})</span>"),
        ("NDG", "—" if run.ndg is None else f"{run.ndg:.1f}"),
        ("candidates", _candidate_counts(report)),
        ("team versions", str(len(report.versions))),
    ]
    return "<table>" + "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows) + "</table>"


def _candidate_counts(report: RunReport) -> str:
    passed = sum(1 for c in report.candidates if c.status == "PASSED")
    failed = len(report.candidates) - passed
    return (f"<span id=count-candidates>{len(report.candidates)}</span>: "
            f"<span id=count-passed>{passed}</span> passed, <span id=count-failed>{failed}</span> failed"
            + (" <span class=muted>(see Failed candidates)</span>" if failed else ""))


def _failed(report: RunReport) -> str:
    """What failed and why: a person's first question about a run that is not going well."""
    failed = report.failed
    if not failed:
        return "<p class=muted>None: every candidate passed.</p>"
    shown = [c for c in failed if c.message is not None]
    head = "<tr><th>candidate</th><th>status</th><th>version</th><th>role</th><th>when</th><th>message</th></tr>"
    rows = "".join(
        f"<tr class=failed-candidate><td>{html.escape(c.id)}</td><td>{html.escape(c.status)}</td>"
        f"<td>{'' if c.team_version is None else f'v{c.team_version}'}</td><td>{html.escape(c.role or '')}</td>"
        f"<td>{c.at:%Y-%m-%d %H:%M}</td><td>{html.escape(c.message or '')}</td></tr>" for c in shown)
    more = len(failed) - len(shown)
    tail = (f"<p class=muted>and {more} older failed candidates: <code>evoteam kb candidates "
            f"{html.escape(report.run.id)}</code> lists them all.</p>") if more else ""
    return f"<table>{head}{rows}</table>{tail}"


def _timeline(report: RunReport) -> str:
    if not report.versions:
        return ("<p class=muted>No team version yet: a run driven by <code>/evolve-team</code> or <code>evoteam "
                "supervise</code> has one per team the supervisor designs.</p>")
    head = "<tr><th>version</th><th>designed</th><th class=num>spend then</th><th class=num>cost</th>" \
           "<th class=num>best (95% interval)</th><th>gain over the best before</th><th>roles</th>" \
           "<th>diagnosis (why it changed)</th></tr>"
    body = "".join(
        f"<tr><td>v{v.version}</td><td>{v.at:%Y-%m-%d %H:%M}</td><td class=num>${v.spent_usd:.2f}</td>"
        f"<td class=num>${v.cost_usd:.2f}</td><td class=num>{html.escape(describe_score(v.best_of_version, v.best_interval, runs=v.best_runs, exact=v.best_exact))}</td>"
        f"<td>{html.escape(gain_text(v, report.direction) or '')}</td>"
        f"<td>{html.escape(', '.join(v.roles))}</td><td>{html.escape(v.diagnosis[:600])}</td></tr>"
        for v in report.versions)
    return f"<table>{head}{body}</table>"


def _remeasured(report: RunReport) -> str:
    m = report.remeasured
    if m is None:
        return ("<p class=muted>Not re-measured yet: <code>evoteam bench remeasure RUN --split all</code> measures "
                "the best candidate of every version and a copy of the baseline again, in one interleaved batch.</p>")

    def cell(score, interval, runs: int | None = None) -> str:  # runs: the batch's, where known
        if score is None:
            return "—"
        if not interval:
            return _fmt(score)
        return html.escape(describe_score(score, interval, runs=runs))

    # A held-out column only for a batch that measured the held-out split: its dashes read as "no
    # held-out score" beside the run's held-out check (model-play 2026-12-04).
    heldout = "heldout" in m.splits
    head = ("<tr><th>candidate</th><th>version</th><th class=num>recorded</th><th class=num>this batch (dev)</th>"
            f"{'<th class=num>held-out (this batch)</th>' if heldout else ''}<th class=num>pooled</th>"
            "<th>rank before → after</th><th></th></tr>")
    rows = "".join(
        f"<tr><td>{html.escape(e.candidate_id)}</td><td>{'' if e.team_version is None else f'v{e.team_version}'}</td>"
        f"<td class=num>{cell(e.recorded_score, e.recorded_interval)}</td>"
        f"<td class=num>{cell(e.score, e.score_interval, m.rounds)}</td>"
        f"{f'<td class=num>{cell(e.heldout_score, e.heldout_interval, m.rounds)}</td>' if heldout else ''}"
        f"<td class=num>{cell(e.pooled_score, e.pooled_interval)}</td>"
        f"<td>{'' if e.rank_before is None else f'{e.rank_before} → {e.rank_after}'}</td>"
        f"<td>{'<b>rank changed</b>' if e.candidate_id in m.changed else ''}"
        f"{' better than the top, side by side' if e.candidate_id in m.better_than_top else ' within noise of the top' if e.candidate_id in m.within_noise_of_top else ''}</td></tr>"
        for e in m.entries)
    # The newest batch may be a side batch of named candidates: its top is then not the run's best.
    best = report.best_candidate_id
    aside = (f" The run's best, {html.escape(best)}, is not in this batch: its top and \"within noise of the top\" "
             "speak of these candidates only." if best and best not in {e.candidate_id for e in m.entries} else "")
    return (f"<p>Measured {m.measured_at:%Y-%m-%d %H:%M} UTC, {m.rounds} interleaved rounds, splits "
            f"{', '.join(m.splits)}{' (contended machine: wider intervals)' if m.contended else ''}. "
            f"Rule: {html.escape(m.rule)}.{' ' + html.escape(m.note) if m.note else ''}{aside}</p>"
            f"<table>{head}{rows}</table>")


def _retrieval_summary(report: RunReport) -> str:
    r = report.retrieval
    rate = "—" if r.repeated_url_rate is None else f"{100 * r.repeated_url_rate:.0f}%"
    rho = "—" if r.spearman is None else f"{r.spearman:.2f} ({len(r.pairs)} pairs)"
    return (f"<p>{len(r.gates)} gate decisions · {r.results_returned} results returned · "
            f"{r.distinct_urls} distinct URLs · repeated URLs {rate} · predicted vs realised Spearman ρ {rho}</p>")


def report_charts(report: RunReport) -> dict[str, dict[str, Any]]:
    """Chart name -> Vega-Lite spec, for the charts this run has data for."""
    specs = {"progress": charts.progress(report), "versions": charts.versions(report),
             "workloads": charts.workloads(report), "spend": charts.spend(report),
             "retrieval": charts.retrieval(report)}
    return {name: spec for name, spec in specs.items() if spec is not None}


def _page(title: str, sections: list[tuple[str, str]], specs: dict[str, dict[str, Any]],
          refresh_s: int | None = None) -> str:
    refresh = f'<meta http-equiv="refresh" content="{int(refresh_s)}">' if refresh_s else ""
    body = "".join(f"<h2>{html.escape(h)}</h2>{content}" for h, content in sections)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">{refresh}
<title>{html.escape(title)}</title><style>{_STYLE}</style>
<script>{_vega_bundle()}</script></head>
<body><h1>{html.escape(title)}</h1>{body}
<script type="application/json" id="evoteam-specs">{_json_for_script(specs)}</script>
<script>
const specs = JSON.parse(document.getElementById("evoteam-specs").textContent);
for (const [name, spec] of Object.entries(specs)) {{
  const el = document.getElementById("chart-" + name);
  if (el) vegaEmbed(el, spec, {{renderer: "svg", actions: {{export: true, source: false, compiled: false, editor: false}}}});
}}
</script></body></html>"""


def _chart(name: str, specs: dict, why_not: str = "No data yet.") -> str:
    # A chart with nothing on it says less than a sentence: draw only what has data.
    if name in specs:
        return f'<div class="chart" id="chart-{name}"></div>'
    return f'<p class="muted no-chart" id="no-chart-{name}">{html.escape(why_not)}</p>'


def render_report(report: RunReport, refresh_s: int | None = None) -> str:
    """The whole report of one run as one HTML page."""
    specs = report_charts(report)
    one_version = len(report.versions) == 1
    sections = [
        ("Summary", _summary(report)),
        ("Failed candidates", _failed(report)),
        ("Progress", _chart("progress", specs, "No candidate has passed yet, so there is no score to draw; "
                                               "the failed candidates above say why.")),
        ("Team versions", (_chart("versions", specs, "One team version so far: its best score is in the table below."
                                  if one_version else "Fewer than two team versions have a score yet.")
                           + _timeline(report)) if report.versions else _timeline(report)),
        ("Re-measured together", _remeasured(report)),
        ("Best candidate per workload", _chart("workloads", specs, "No passing candidate with per-workload "
                                                                   "speedups yet (program kits have none).")),
        ("Cost", _chart("spend", specs, "No spend recorded for this run: the evoteam hooks record what the "
                                        "sessions spend, and none recorded any here (not installed, or the work ran "
                                        "outside an agent session).")),
        ("Retrieval", _retrieval_summary(report) + _chart("retrieval", specs, "No retrieval in this run.")),
    ]
    return _page(f"evoteam run {report.run.id}", sections, specs, refresh_s)


def render_comparison(reports: list[RunReport], thresholds: list[float]) -> str:
    """Several runs of one kit side by side: progress against spend, best per workload, and the
    spend at which each run first reached each threshold."""
    specs = {"compare": charts.compare_progress(reports)}
    per_workload = charts.compare_workloads(reports)
    if per_workload:
        specs["workloads"] = per_workload
    head = "<tr><th>run</th><th>goal</th><th class=num>spent</th><th class=num>best</th>" + "".join(
        f"<th class=num>first ≥ {t:g}</th>" for t in thresholds) + "</tr>"
    rows = []
    for rep in reports:
        cells = []
        for t in thresholds:
            hit = first_reaching(rep, t)
            cells.append("<td class=num>—</td>" if hit is None else f"<td class=num>${hit:.2f}</td>")
        rows.append(f"<tr><td>{html.escape(rep.run.id)}</td><td>{html.escape(rep.run.goal[:120])}</td>"
                    f"<td class=num>${rep.run.spent_usd:.2f}</td><td class=num>{_fmt(rep.run.best_score)}</td>"
                    + "".join(cells) + "</tr>")
    sections = [("Runs", f"<table>{head}{''.join(rows)}</table>"),
                ("Progress against spend", _chart("compare", specs)),
                ("Best candidate per workload", _chart("workloads", specs))]
    return _page(f"evoteam comparison: {reports[0].run.kit}", sections, specs)


def first_reaching(report: RunReport, threshold: float) -> float | None:
    """The cumulative spend at which the run's running best first reached `threshold`."""
    reached = (lambda s: s >= threshold) if report.direction == "maximize" else (lambda s: s <= threshold)
    for c in report.candidates:
        if c.best_so_far is not None and reached(c.best_so_far):
            return c.spent_usd
    return None


def write_pngs(specs: dict[str, dict[str, Any]], folder: Path) -> list[Path]:
    """Render each chart to PNG without a browser (vl-convert), for papers and PR comments."""
    import vl_convert

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, spec in specs.items():
        path = folder / f"{name}.png"
        path.write_bytes(vl_convert.vegalite_to_png(spec, scale=2))
        out.append(path)
    return out
