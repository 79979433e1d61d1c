"""The Stop hook reads a bounded page of the newest history, and still sees the latest reflection
when a run's history is longer than one page."""

from __future__ import annotations

import asyncio

from evoteam.plugin import hooks, state
from evoteam.servers.knowledge.models import HistoryEntryCreate
from tests.plugin.test_hooks import _store, base_input, env, seed  # noqa: F401  (env is a fixture)


def test_stop_sees_the_reflection_on_the_newest_version_of_a_long_history(env):  # noqa: F811
    p = env["project"]
    run_id = seed(env["db"])

    async def reflect_on_many():
        async with _store(env["db"]) as kb:
            for v in range(1, 261):
                await kb.add_history(HistoryEntryCreate(run_id=run_id, team_version=v, outcome=f"v{v} done"))
            await kb.update_run(run_id, current_version=261)

    asyncio.run(reflect_on_many())
    state.activate(p, run_id, session_id="sess-1")
    inp = base_input(p, "Stop", stop_hook_active=False, background_tasks=[])
    state.update_state(p, finished_version=260)  # reflected on already (the newest entry)
    reason = hooks.stop(inp)["reason"]
    assert "Every role of team v260 has ended" not in reason and "Check team v261" in reason
    state.update_state(p, finished_version=261, idle_continues=0, last_fingerprint=None)  # not reflected on yet
    assert "Every role of team v261 has ended" in hooks.stop(inp)["reason"]
