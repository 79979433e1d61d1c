"""EvoDuet's retrieval loop inside an OpenEvolve run (``openevolve`` 0.4.x from PyPI).

OpenEvolve builds a mutation prompt from the parent and recent programs and asks its LLM for a
child. ``attach_retrieval(config, options)`` gives every model of the run a client of ours (through
OpenEvolve's ``LLMModelConfig.init_client``) that, for each iteration:

1. reads the iteration's evolutionary context (parent code and metrics, recent programs) from the
   prompt OpenEvolve just built (we wrap ``PromptSampler.build_prompt`` in OpenEvolve's worker
   processes to see its arguments);
2. calls our retrieval gate with it (decision ``auto``: the predictor decides; or a fixed one);
3. on ``retrieve`` runs the query-evolving inner loop (search backends, forecasts frozen in the
   store); on ``look-up`` takes the run's stored documents; keeps the top D;
4. adds the gate's decision and the documents (fenced as untrusted data) to the mutation prompt;
5. asks the model for N candidates when documents are used (1 on no-op), applies each to the
   parent, evaluates each with evoteam's bench (recorded in the store; on the device pool or a
   Ray cluster when ``EVOTEAM_BENCH_BACKEND`` says so, so ``parallel_evaluations: 4`` evaluates
   on four devices at once) and returns the best valid one to OpenEvolve;
6. credits the documents with the realised score of that best candidate (``record_outcome``).

Everything lands in the evoteam store (``EVOTEAM_DB`` or ``options.db``), so ``retrieval_stats``,
``lookup`` and the candidate archive cover scaffold runs and agent sessions alike. Forecasts,
queries and the gate decision use the same OpenAI-compatible endpoint as the scaffold
(``ChatPredictor``), with the prompts of evoteam's retrieval server.
"""

from __future__ import annotations

import functools
import json
import logging
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.retrieval.models import Direction, KnowledgeState
from evoteam.servers.retrieval.predictor import UNTRUSTED_RULE, AnthropicPredictor, DocForScoring, PredictorError, fence

log = logging.getLogger(__name__)

# The iteration context captured from OpenEvolve's prompt building, per worker process.
_CONTEXT: dict[str, Any] = {}


class RetrievalOptions(BaseModel):
    """How the adapter runs EvoDuet's loop inside OpenEvolve. Passed to OpenEvolve's worker
    processes as plain data."""

    db: str = Field(description="the evoteam store (SQLite file) to record into")
    run_id: str | None = Field(default=None, description="the evoteam run (default: prepare_run's)")
    kit: str = Field(description="the kit (folder path or name) whose evaluator scores candidates")
    kits_dirs: list[str] = Field(default_factory=list)
    corpus_dirs: list[str] = Field(default_factory=list, description="local corpus folders to search")
    search_backends: list[str] = Field(default_factory=lambda: ["local"])
    decision: Literal["auto", "no-op", "look-up", "retrieve"] = "auto"
    open_questions: list[str] = Field(default_factory=list, description="the knowledge gaps that steer search")
    n_candidates: int = Field(default=4, ge=1, le=16, description="N: candidates per iteration with documents")
    keep: int = Field(default=3, ge=1, le=10, description="D: documents put into the prompt")
    rounds: int = Field(default=2, ge=1, le=10)
    queries_per_round: int = Field(default=2, ge=1, le=10)
    results_per_query: int = Field(default=5, ge=1, le=20)
    doc_chars: int = Field(default=1500, ge=200, le=6000, description="characters of each document in the prompt")
    predictor_model: str | None = Field(default=None, description="model for forecasts and the gate; default: "
                                        "the scaffold's model")
    api_base: str | None = None
    api_key: str | None = None

    def settings(self) -> Settings:
        from evoteam.config import load_settings

        base = load_settings()
        return base.model_copy(update={
            "db": Path(self.db), "kits_dirs": [Path(d) for d in self.kits_dirs] + list(base.kits_dirs),
            "corpus_dirs": [Path(d) for d in self.corpus_dirs], "search_backends": list(self.search_backends)})


# ---------------------------------------------------------------- predictor on chat completions


def _as_function(tool: dict) -> dict:
    return {"type": "function", "function": {"name": tool["name"], "description": tool["description"],
                                             "parameters": tool["input_schema"]}}


class ChatPredictor(AnthropicPredictor):
    """The retrieval predictor on an OpenAI-compatible chat-completions endpoint (the scaffold's
    own model). Same prompts and validation as the Anthropic predictor; forced function calls
    carry the forecasts, queries and gate decision."""

    name = "chat"
    server_side = True

    def __init__(self, model: str, api_base: str | None, api_key: str | None, timeout_s: float = 120.0):
        # Not the Anthropic client: only the transport (_call) differs.
        import openai

        self.model = model
        self.client = openai.AsyncOpenAI(base_url=api_base, api_key=api_key or "unused", timeout=timeout_s,
                                         max_retries=1)
        self._http = None
        self.input_tokens = 0
        self.output_tokens = 0
        self.calls = 0

    async def _call(self, system: str, user: str, tool: dict) -> dict | None:
        import openai

        try:
            reply = await self.client.chat.completions.create(
                model=self.model, messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                tools=[_as_function(tool)], tool_choice={"type": "function", "function": {"name": tool["name"]}})
        except openai.OpenAIError as exc:
            raise PredictorError(f"the chat predictor call failed: {exc}") from exc
        self.calls += 1
        usage = getattr(reply, "usage", None)
        if usage is not None:
            self.input_tokens += getattr(usage, "prompt_tokens", 0) or 0
            self.output_tokens += getattr(usage, "completion_tokens", 0) or 0
        for choice in reply.choices[:1]:
            for call in choice.message.tool_calls or []:
                if call.function.name == tool["name"]:
                    try:
                        data = json.loads(call.function.arguments or "{}")
                    except ValueError:
                        return None
                    return data if isinstance(data, dict) else None
        return None


# ---------------------------------------------------------------- set-up (in the controller's process)


async def prepare_run(settings: Settings, kit: str) -> str:
    """The evoteam run an OpenEvolve run records into: the kit's newest active run, or a new one."""
    from evoteam.servers.bench.evaluation.binding import resolve_run
    from evoteam.servers.bench.formats.kits import find_kit
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    the_kit = find_kit(settings, kit)
    async with LocalKnowledgeStore.open(settings.db, Actor(user="openevolve", client="openevolve-adapter")) as s:
        return (await resolve_run(s, the_kit, None))[0]


def attach_retrieval(config: Any, options: RetrievalOptions) -> Any:
    """Give every model of an OpenEvolve ``Config`` the retrieval client. Returns the config."""
    if not config.llm.models:
        raise DomainError("the OpenEvolve config has no LLM models; add llm.models (or llm.primary_model)")
    data = options.model_dump()
    # OpenEvolve's workers may run elsewhere in the file system: pass absolute paths.
    if Path(options.kit).expanduser().is_dir():
        data["kit"] = str(Path(options.kit).expanduser().resolve())
    data["db"] = str(Path(options.db).expanduser().resolve())
    for model in config.llm.models:
        if model.init_client is not None:
            raise DomainError(f"model {model.name} already has a custom client (init_client); the retrieval "
                              "adapter wraps OpenEvolve's OpenAI client only")
        model.init_client = functools.partial(make_client, data)
    return config


def make_client(options: dict[str, Any], model_cfg: Any) -> EvoDuetLLM:
    """OpenEvolve's ``init_client`` hook (runs in each OpenEvolve worker process)."""
    _capture_prompt_context()
    return EvoDuetLLM(model_cfg, RetrievalOptions(**options))


def _capture_prompt_context() -> None:
    """Wrap ``PromptSampler.build_prompt`` (once per process) so the client sees the parent and
    the recent programs of the iteration whose prompt it is asked to complete."""
    from openevolve.prompt import sampler

    original = sampler.PromptSampler.build_prompt
    if getattr(original, "_evoteam_wrapped", False):
        return

    @functools.wraps(original)
    def build_prompt(self, *args: Any, **kwargs: Any) -> dict[str, str]:
        prompt = original(self, *args, **kwargs)
        if not args and kwargs.get("template_key") is None and "current_program" in kwargs:
            _CONTEXT.clear()
            _CONTEXT.update(user=prompt["user"], parent=kwargs.get("current_program") or "",
                            metrics=dict(kwargs.get("program_metrics") or {}),
                            previous=list(kwargs.get("previous_programs") or []),
                            diff=bool(kwargs.get("diff_based_evolution", True)),
                            language=kwargs.get("language") or "python")
        return prompt

    build_prompt._evoteam_wrapped = True  # type: ignore[attr-defined]
    sampler.PromptSampler.build_prompt = build_prompt


# ---------------------------------------------------------------- the client (in OpenEvolve's workers)


def _diff_pattern() -> str:
    try:
        from openevolve import process_parallel

        return process_parallel._worker_config.diff_pattern
    except AttributeError:
        from openevolve.config import Config

        return Config().diff_pattern


def apply_response(parent: str, response: str, diff: bool, language: str) -> str | None:
    """The child program a response describes (SEARCH/REPLACE diffs or a full rewrite), or None."""
    from openevolve.utils.code_utils import apply_diff_blocks, extract_diffs, parse_full_rewrite

    if diff:
        try:
            blocks = extract_diffs(response, _diff_pattern())
        except ValueError:
            return None
        if not blocks:
            return None
        child, applied = apply_diff_blocks(parent, blocks)
        return child if applied and child != parent else None
    child = parse_full_rewrite(response, language)
    return child if child and child != parent else None


def _score_of(metrics: dict[str, Any], objective: str) -> float | None:
    from evoteam.servers.bench.formats.openevolve import fitness

    value = metrics.get(objective)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return fitness(metrics) if objective == "combined_score" else None


def _better(direction: Direction, a: float, b: float) -> bool:
    return a > b if direction == "maximize" else a < b


def retrieval_section(decision: str, reason: str, docs: Sequence[tuple[str, str, str, str]]) -> str:
    """The part of the mutation prompt the gate adds: its decision and the documents, fenced."""
    nonce = secrets.token_hex(6)
    lines = ["", "# Retrieved knowledge (EvoDuet retrieval gate)",
             f"Retrieval gate decision: {decision} ({reason[:300]})"]
    if docs:
        lines.append(UNTRUSTED_RULE.format(nonce=nonce))
        lines.append("Use the single most useful idea from these documents in your change:")
        for doc_id, title, url, text in docs:
            lines.append(fence(DocForScoring(id=doc_id, title=title, url=url, content=text), nonce, len(text)))
    else:
        lines.append("No documents for this iteration: improve the program from what is known.")
    return "\n".join(lines) + "\n"


class EvoDuetLLM:
    """OpenEvolve's LLM interface, with EvoDuet's gate, search, best-of-N and outcome credit
    around OpenEvolve's own OpenAI client."""

    def __init__(self, model_cfg: Any, options: RetrievalOptions):
        from openevolve.llm.openai import OpenAILLM

        self.options = options
        self.inner = OpenAILLM(model_cfg)
        self.model = model_cfg.name
        self.api_base = options.api_base or model_cfg.api_base
        self.api_key = options.api_key or model_cfg.api_key
        self.system_message = getattr(model_cfg, "system_message", None)
        self.last_usage = None

    async def generate(self, prompt: str, **kwargs: Any) -> str:
        return await self.generate_with_context(self.system_message, [{"role": "user", "content": prompt}], **kwargs)

    async def generate_with_context(self, system_message: str, messages: list[dict[str, str]], **kwargs: Any) -> str:
        context = dict(_CONTEXT) if _CONTEXT and messages and messages[-1].get("content") == _CONTEXT.get("user") else None
        if context is None:  # not an evolution prompt (e.g. LLM feedback): plain pass-through
            return await self.inner.generate_with_context(system_message, messages, **kwargs)
        _CONTEXT.clear()
        try:
            return await self._iteration(system_message, messages, context, kwargs)
        except (DomainError, PredictorError, OSError, ValidationError) as exc:
            # Retrieval must never stop the scaffold: fall back to a plain generation.
            log.warning("evoteam retrieval skipped for this iteration: %s", exc)
            return await self.inner.generate_with_context(system_message, messages, **kwargs)

    async def _iteration(self, system_message: str, messages: list[dict[str, str]], context: dict[str, Any],
                         kwargs: dict[str, Any]) -> str:
        from evoteam.servers.bench.formats.kits import find_kit
        from evoteam.servers.bench.scheduling.dispatch import evaluate_configured
        from evoteam.servers.knowledge.local import LocalKnowledgeStore
        from evoteam.servers.knowledge.store import Actor
        from evoteam.servers.retrieval.backends import build_backends
        from evoteam.servers.retrieval.core import RetrievalService
        from evoteam.servers.retrieval.models import GateInput, OutcomeCreate, SearchConfig, SearchInput

        opts = self.options
        settings = opts.settings()
        kit = find_kit(settings, opts.kit)
        objective, direction = kit.manifest.objective or "combined_score", kit.manifest.direction
        parent_score = _score_of(context["metrics"], objective)
        known = [f"parent {objective} = {parent_score}"]
        for p in context["previous"][-3:]:
            changes = (p.get("metadata") or {}).get("changes") or p.get("changes_description") or "unknown change"
            known.append(f"earlier attempt ({str(changes)[:160]}): {objective} = "
                         f"{_score_of(p.get('metrics') or {}, objective)}")
        state = KnowledgeState(known=known, open_questions=list(opts.open_questions))
        summary = context["parent"][:4000]
        actor = Actor(user="openevolve", client="openevolve-adapter", role="OpenEvolve iteration")
        predictor = ChatPredictor(opts.predictor_model or self.model, self.api_base, self.api_key)
        async with LocalKnowledgeStore.open(Path(opts.db), actor) as store:
            service = RetrievalService(store, predictor, build_backends(settings))
            try:
                gate = await service.gate(GateInput(
                    run_id=opts.run_id, decision=opts.decision, knowledge_state=state, parent_score=parent_score,
                    parent_summary=summary, n_candidates=opts.n_candidates, limit=opts.keep))
                refs = list(gate.documents)
                decision = gate.decision
                if decision == "retrieve":
                    found = await service.search(SearchInput(
                        gate_id=gate.gate_id, parent_score=parent_score, parent_summary=summary,
                        config=SearchConfig(rounds=opts.rounds, queries_per_round=opts.queries_per_round,
                                            results_per_query=opts.results_per_query, keep=opts.keep)))
                    refs = list(found.documents)
                docs = []
                for ref in refs[: opts.keep]:
                    full = (await service.lookup(document_id=ref.id, max_chars=opts.doc_chars)).document
                    docs.append((ref.id, ref.title, ref.url, full.content))
                n = gate.n_candidates if docs else 1
                section = retrieval_section(decision, gate.reason, docs)
                prompt = [dict(m) for m in messages]
                prompt[-1]["content"] = prompt[-1]["content"] + section
                best: tuple[float, str, str] | None = None
                first_response = None
                for k in range(n):
                    response = await self.inner.generate_with_context(system_message, prompt, **kwargs)
                    self.last_usage = getattr(self.inner, "last_usage", None)
                    first_response = first_response or response
                    child = apply_response(context["parent"], response or "", context["diff"], context["language"])
                    if child is None:
                        continue
                    try:
                        # On the device pool or Ray (EVOTEAM_BENCH_BACKEND) when configured: then
                        # OpenEvolve's parallel workers evaluate on as many devices at once.
                        result = await evaluate_configured(
                            settings, kit, code=child, store=store, run_id=opts.run_id, run_key=opts.run_id,
                            documents_used=[d[0] for d in docs], credit_documents=False,
                            notes=f"OpenEvolve iteration, candidate {k + 1}/{n} of gate {gate.gate_id} "
                                  f"({decision}; documents {', '.join(d[0] for d in docs) or 'none'})")
                    except DomainError as exc:  # e.g. an edit outside the EVOLVE-BLOCKs
                        log.info("candidate %d/%d refused: %s", k + 1, n, exc)
                        continue
                    if result.score is not None and (best is None or _better(direction, result.score, best[0])):
                        best = (result.score, response, result.candidate_id or "")
                if best is not None:
                    await service.record_outcome(OutcomeCreate(
                        run_id=opts.run_id, document_ids=[d[0] for d in docs], realised_score=best[0],
                        parent_score=parent_score, direction=direction, candidate_id=best[2] or None, gate_id=gate.gate_id))
                return best[1] if best is not None else (first_response or "")
            finally:
                await service.aclose()


# ---------------------------------------------------------------- running OpenEvolve on a kit


def openevolve_config(kit_root: Path, *, model: str | None, api_base: str | None, api_key: str | None) -> Any:
    """OpenEvolve's Config for a kit: the folder's config.yaml when it has one, else OpenEvolve's
    defaults; ``model``/``api_base``/``api_key`` override the LLM section."""
    from openevolve.config import Config, LLMModelConfig, load_config

    path = kit_root / "config.yaml"
    config = load_config(str(path)) if path.is_file() else Config()
    if model or not config.llm.models:
        if not model:
            raise DomainError(f"{kit_root} has no config.yaml with llm.models: pass a model name")
        config.llm.models = [LLMModelConfig(name=model, weight=1.0)]
        config.llm.evaluator_models = list(config.llm.models)
    shared = {"api_base": api_base or config.llm.api_base, "api_key": api_key or config.llm.api_key,
              "temperature": config.llm.temperature, "max_tokens": config.llm.max_tokens,
              "timeout": config.llm.timeout, "retries": config.llm.retries, "retry_delay": config.llm.retry_delay}
    config.llm.update_model_params({k: v for k, v in shared.items() if v is not None},
                                   overwrite=bool(api_base or api_key))
    return config


async def run_openevolve(kit: str, options: RetrievalOptions, *, iterations: int, output_dir: str,
                         model: str | None = None, api_base: str | None = None, api_key: str | None = None) -> dict:
    """Run ``iterations`` OpenEvolve iterations on a kit with the retrieval adapter; returns a summary."""
    from openevolve.controller import OpenEvolve

    from evoteam.servers.bench.formats.kits import find_kit

    settings = options.settings()
    the_kit = find_kit(settings, kit)
    if the_kit.manifest.kind != "program":
        raise DomainError(f"kit {the_kit.name} is a {the_kit.manifest.kind} kit; OpenEvolve runs program kits")
    start = the_kit.starting_point()
    if start is None:
        raise DomainError(f"kit {the_kit.name} has no initial program")
    config = openevolve_config(the_kit.root, model=model, api_base=api_base, api_key=api_key)
    options = options.model_copy(update={"kit": str(the_kit.root), "api_base": api_base or options.api_base,
                                         "api_key": api_key or options.api_key})
    if not options.run_id:
        options.run_id = await prepare_run(settings, str(the_kit.root))
    attach_retrieval(config, options)
    controller = OpenEvolve(initial_program_path=str(start), evaluation_file=str(the_kit.file(the_kit.manifest.evaluator)),
                            config=config, output_dir=output_dir)
    best = await controller.run(iterations=iterations)
    return {"run_id": options.run_id, "kit": the_kit.name,
            "best_metrics": dict(best.metrics) if best is not None else {},
            "best_score": _score_of(best.metrics, the_kit.manifest.objective or "combined_score") if best else None}
