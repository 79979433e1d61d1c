"""`evoteam team status` read quickly from a local store file (knowledge/quickread.py says when a
quick read may answer, and why it exists: a newcomer's first commands within 0.2 s).

The same rows as `TeamService.team_status` reads, through the same queries and rules (the
knowledge store's and the team's readsql.py, sentences.py), handed to the printer with the
attributes of models.TeamStatus and RoleState. The queue summary of the JSON answer is not
read here: `--json` takes the normal path."""

from __future__ import annotations

import json
from types import SimpleNamespace

from evoteam.servers.knowledge import quickread
from evoteam.servers.knowledge import readsql as kb_sql
from evoteam.servers.knowledge.bestline import run_interval
from evoteam.servers.team import readsql
from evoteam.servers.team.sentences import sentence_tail


def team_status(values: dict, run_id: str | None, version: int | None) -> SimpleNamespace | None:
    """The team of `run_id` (default: the newest active run) at `version` (default: the run's
    current one); None: take the normal path (it also says what is missing)."""

    def body(conn):
        if run_id is None:
            rows = conn.execute(kb_sql.runs_listing("1 = 1 AND status = ?")[1], ["active", 1, 0]).fetchall()
            if not rows:
                raise quickread.NotQuick
            row = rows[0]
        else:
            row = quickread.run_row(conn, run_id)
        run = quickread.run_view(conn, row)
        if run.best_candidate_id and conn.execute(kb_sql.BEST_IN_DEV_PAIRED_ROUNDS,
                                                  (run.id, f'"{run.best_candidate_id}"')).fetchone():
            raise quickread.NotQuick  # paired rounds may crown another (pairedbest.py): the store reads them
        shown = version if version is not None else run.current_version
        roles, finished = [], False
        if shown is not None:
            stored = conn.execute(readsql.VERSION, (run.id, shown)).fetchone()
            if stored is None:
                raise quickread.NotQuick
            latest = {s["slug"]: s for s in conn.execute(readsql.sessions("run_id = ? AND version = ?"),
                                                          (run.id, shown)).fetchall()}
            for spec in json.loads(stored["design"])["roles"]:
                slug = readsql.slugify(spec["name"])
                s = latest.get(slug)
                if s is None:
                    roles.append(SimpleNamespace(role=spec["name"], slug=slug, status="planned", runner="subagent",
                                                 cost_usd=0.0, cap_usd=None, turns=0, last_message="", error=None))
                    continue
                roles.append(SimpleNamespace(role=s["role"], slug=s["slug"], status=s["status"], runner=s["runner"],
                                             stage=s["stage"], cost_usd=s["cost_usd"], cap_usd=s["cap_usd"],
                                             turns=s["turns"], last_message=sentence_tail(s["last_message"], 500),
                                             error=s["error"]))
            finished = all(r.status in readsql.TERMINAL for r in roles)
        return SimpleNamespace(run_id=run.id, run_status=run.status, version=shown, finished=finished, roles=roles,
                               best_score=run.best_score, best_candidate_id=run.best_candidate_id, paired_best=None,
                               best_interval=run_interval(run), ndg=run.ndg,
                               spent_usd=quickread.spent(conn, run.id), budget_usd=run.budget_usd,
                               costs_recorded=not readsql.costs_unrecorded(
                                   len(conn.execute(kb_sql.SPEND_LINES, (run.id,)).fetchall()),
                                   bool(run.candidates or run.current_version)))

    return quickread.read(values, body)
