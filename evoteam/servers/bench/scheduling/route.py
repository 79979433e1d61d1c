"""Where an evaluation runs: here, or on the team's evaluation service.

On a shared knowledge server only a verifier may record scores that rank, and a verifier token
must never sit in an agent's environment (the agent could record any score with it). So when
`EVOTEAM_BENCH_URL` names an evaluation service (`evoteam bench serve --http`, service.py), the
agent's `bench.evaluate` sends the candidate's source there with the agent's own token
(`EVOTEAM_TOKEN`): the service measures it with its own harness and held-out set, and records
it, verified, in the agent's name. `bench.compare` and `bench.remeasure` go there too: they
measure, and remeasure pools verified rounds into the run's candidates (in an agent's own bench
it had neither the service's held-out set nor the right to pool, and made unverified copies).
Nothing that decides the score runs in the agent's session.
"""

from __future__ import annotations

from pathlib import Path

from evoteam.config import Settings
from evoteam.errors import DomainError, first_leaf
from evoteam.servers.bench.evaluation import core
from evoteam.servers.bench.evaluation.candidates import HELDOUT_CHECK, check_candidate_path
from evoteam.servers.bench.formats.kits import find_kit
from evoteam.servers.bench.models import BASELINE_ID, Evaluation, Split
from evoteam.servers.knowledge.store import KnowledgeStore

SERVICE_TIMEOUT_S = 3600.0  # one evaluation may queue behind others for the device


async def evaluate(settings: Settings, kit: str, *, candidate_path: str | None, code: str | None, split: Split,
                   store: KnowledgeStore | None, run_id: str | None, parent_id: str | None,
                   documents_used: list[str], notes: str, role: str | None, team_version: int | None,
                   progress: core.Progress, in_service: bool = False, candidate_id: str | None = None,
                   repeats: int = 1) -> Evaluation:
    """Evaluate and record one candidate: on the evaluation service when one is configured
    (and this process is not that service), else here."""
    if sum(bool(x) for x in (candidate_path, code, candidate_id)) != 1:
        raise DomainError("pass exactly one of candidate_path (a file), code (its source) or candidate_id")
    if candidate_id == BASELINE_ID:
        raise DomainError("'baseline' is the kit's baseline, which every evaluation is timed against (the speedup "
                          "is over it); to time it as a candidate, pass candidate_path = describe_kit's starting_point")
    if parent_id == BASELINE_ID:
        parent_id = None  # a candidate written from the kit's baseline has no recorded parent
    if candidate_id and split != "dev" and parent_id is None:
        # A held-out check of a recorded candidate is recorded apart (other workloads); it names
        # the candidate it checks, so listings and the report tie the two together.
        parent_id, notes = candidate_id, notes or f"{HELDOUT_CHECK}{candidate_id}"
    if in_service:
        if candidate_path:
            # A path would name a file on the service's host, not the caller's.
            raise DomainError("the evaluation service takes the candidate's source (code); an agent's "
                              "bench.evaluate with EVOTEAM_BENCH_URL set sends it for you")
    elif settings.bench_url:
        return await evaluate_remote(settings, kit, candidate_path=candidate_path, code=code, split=split,
                                     run_id=run_id, parent_id=parent_id, documents_used=documents_used,
                                     notes=notes, role=role, team_version=team_version, progress=progress,
                                     candidate_id=candidate_id, repeats=repeats)
    # On the service the store's actor is the caller (service.py): without run_id, their own
    # newest active run of the kit is used, never a colleague's.
    owner = store.actor.user if in_service and store is not None else None
    if settings.bench_backend != "local":  # this host's device pool, or a Ray cluster (scheduling/)
        from evoteam.servers.bench.scheduling.dispatch import evaluate_scheduled

        result = await evaluate_scheduled(settings, kit, candidate_path=candidate_path, code=code,
                                          candidate_id=candidate_id, split=split, store=store, run_id=run_id,
                                          parent_id=parent_id, documents_used=documents_used, notes=notes,
                                          owner=owner, progress=progress, repeats=repeats)
    else:
        result = await core.evaluate_candidate(settings, kit, candidate_path=candidate_path, code=code,
                                               candidate_id=candidate_id, split=split, store=store, run_id=run_id,
                                               parent_id=parent_id, documents_used=documents_used, notes=notes,
                                               progress=progress, repeats=repeats, owner=owner)
    return _held_out_said(result, candidate_id)


def _held_out_said(result: Evaluation, checked: str | None) -> Evaluation:
    """A held-out check of a recorded candidate says first whose record it is: models read its new
    id, with the same code_hash, as a breach of "identical code is one candidate" (model-play
    2026-12-04). Each split's candidates are apart: other workloads, another estimate."""
    if checked and result.recorded and result.split != "dev" and result.candidate_id not in (None, checked):
        held_out = result.split == "heldout"
        # A second check pools into the record: "same code as <the record itself>" read as another (mp44).
        said = (result.message or result.status).replace(f"same code as {result.candidate_id}, now ", "", 1)
        result.message = (f"{'held-out record' if held_out else 'record'} {result.candidate_id} of {checked} (the "
                          f"same code on {'the held-out workloads' if held_out else 'all workloads, dev and held-out'}"
                          f", kept apart from its dev measurements): {said}")
    return result


def _source(settings: Settings, candidate_path: str | None, code: str | None) -> str:
    if code is not None and candidate_path:
        raise DomainError("pass exactly one of candidate_path or code")
    if code is not None:
        return code
    path = check_candidate_path(settings, candidate_path)
    if path.suffix != ".py":
        raise DomainError("the evaluation service takes Python source: pass a .py file, or its code")
    return Path(path).read_text()


def kit_name_for_service(settings: Settings, kit: str) -> str:
    """The kit's name as the service knows it (a local folder is named by its manifest)."""
    try:
        return find_kit(settings, kit).name
    except DomainError:
        return kit  # not known here: the service may know it


async def evaluate_remote(settings: Settings, kit: str, *, candidate_path: str | None, code: str | None,
                          split: Split, run_id: str | None, parent_id: str | None, documents_used: list[str],
                          notes: str, role: str | None, team_version: int | None,
                          progress: core.Progress, candidate_id: str | None = None, repeats: int = 1) -> Evaluation:
    """Send one candidate to the evaluation service at `settings.bench_url` as the agent."""
    arguments = {"kit": kit_name_for_service(settings, kit), "split": split, "run_id": run_id, "parent_id": parent_id,
                 "documents_used": documents_used, "notes": notes, "role": role, "team_version": team_version,
                 "repeats": repeats}
    if candidate_id:  # the service reads the recorded code from the shared store itself
        arguments["candidate_id"] = candidate_id
    else:
        arguments["code"] = _source(settings, candidate_path, code)
    return Evaluation.model_validate(await call_service(settings, "evaluate", arguments, progress))


def side_for_service(settings: Settings, side: dict, label: str) -> dict:
    """One side of a comparison as the service takes it: a recorded candidate's id, or source
    (a file here is read here: on the service a path would name the service's files)."""
    if side.get("candidate_id"):
        return {f"{label}_candidate_id": side["candidate_id"]}
    return {f"{label}_code": _source(settings, side.get("candidate_path"), side.get("code"))}


async def call_service(settings: Settings, tool: str, arguments: dict, progress: core.Progress | None = None) -> dict:
    """Call one of the evaluation service's tools as the agent (its own token) and return the
    structured answer: whatever measures or records a score runs there, never in the agent's
    session (evaluate, compare and remeasure alike)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    url = settings.bench_url
    if not settings.token:
        raise DomainError("EVOTEAM_BENCH_URL is set but EVOTEAM_TOKEN is not: the evaluation service knows "
                          "you by your own token (made with `evoteam token add USER --project P`)")

    async def relay(done: float, total: float | None, message: str | None) -> None:
        if progress is not None:
            await progress(done, total, message or "")  # a remeasure's lines come without a total

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {settings.token}"},
                              timeout=httpx2.Timeout(60.0, read=SERVICE_TIMEOUT_S))
    try:
        async with http:
            await _preflight(http, url)
            async with Client(streamable_http_client(url, http_client=http)) as client:
                result = await client.call_tool(tool, arguments, read_timeout_seconds=SERVICE_TIMEOUT_S,
                                                progress_callback=relay)
    except DomainError:
        raise
    except Exception as exc:  # transport failures arrive wrapped in exception groups
        leaf = first_leaf(exc)
        # A dropped connection says nothing ("failed: "; model-play 2026-12-04): its kind, and what to check.
        said = str(leaf).strip() or f"{type(leaf).__name__} (the connection ended without an answer)"
        raise DomainError(f"the evaluation service at {url} failed: {said}; if it stopped, its log says why "
                          "(restart it with `evoteam bench serve --http`)") from None
    if result.is_error:
        text = " ".join(getattr(c, "text", "") for c in result.content).strip()
        raise DomainError(f"the evaluation service refused: {text}")
    return result.structured_content or {}


async def _preflight(http, url: str) -> None:
    """Plain messages for the usual set-up mistakes, before the MCP handshake."""
    import httpx2

    try:
        response = await http.get(url, headers={"Accept": "text/event-stream"})
    except httpx2.HTTPError as exc:
        raise DomainError(f"cannot reach the evaluation service at {url} (EVOTEAM_BENCH_URL): {exc}") from None
    if response.status_code == 401:
        raise DomainError(f"the evaluation service at {url} refused your token: check EVOTEAM_TOKEN")
    if response.status_code == 404:
        raise DomainError(f"no evaluation service at {url}: check EVOTEAM_BENCH_URL (it ends in /mcp)")
