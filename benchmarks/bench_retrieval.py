"""Benchmark of the retrieval server. Prints one table:

1. tokens handed to the calling agent per retrieve vs tokens of the raw results the inner loop
   distilled (target: at least 5x fewer), with the server-side predictor and with the agent
   predictor (where the agent reads every new document's excerpt to score it);
2. local-corpus search latency (p50/p99) at 10k and 100k documents (target: p99 <= 50 ms);
3. repeated-URL rate over a 30-iteration scripted run whose queries evolve (the server's own
   query evolution: novelty filter + evidence terms, no model) vs one that repeats its queries.

Tokens are estimated as characters / 4 (no tokenizer offline). Synthetic corpora are
generated deterministically in a temporary directory.

    .venv/bin/python benchmarks/bench_retrieval.py            # full (100k docs: a few minutes)
    .venv/bin/python benchmarks/bench_retrieval.py --quick    # 2k / 10k docs
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evoteam.servers.knowledge.local import LocalKnowledgeStore  # noqa: E402
from evoteam.servers.knowledge.models import RunCreate  # noqa: E402
from evoteam.servers.knowledge.store import Actor  # noqa: E402
from evoteam.servers.retrieval.backends import BackendSet, LocalBackend  # noqa: E402
from evoteam.servers.retrieval.core import RetrievalService  # noqa: E402
from evoteam.servers.retrieval.corpus import Corpus, index_corpus  # noqa: E402
from evoteam.servers.retrieval.models import (  # noqa: E402
    KnowledgeState,
    QueryCreate,
    ScoreInput,
    ScoreRow,
    ScoringResult,
    SearchConfig,
    SearchInput,
)
from evoteam.servers.retrieval.predictor import AgentPredictor  # noqa: E402
from evoteam.servers.retrieval.store import QueryResultsCreate  # noqa: E402

SYLLABLES = ["ka", "lo", "mi", "ne", "tu", "ra", "si", "vo", "pe", "da", "gu", "zi", "fo", "be", "xa", "qu",
             "re", "ti", "mo", "la", "sen", "tor", "vak", "lin", "dor", "mes", "pra", "kul"]
TOPICS = 60
TOPIC_WORDS = 40
GENERAL_WORDS = 6000


def make_vocab(rng: random.Random) -> tuple[list[list[str]], list[str]]:
    seen: set[str] = set()

    def word() -> str:
        while True:
            w = "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))
            if w not in seen:
                seen.add(w)
                return w

    topics = [[word() for _ in range(TOPIC_WORDS)] for _ in range(TOPICS)]
    general = [word() for _ in range(GENERAL_WORDS)]
    return topics, general


def make_corpus(root: Path, n_docs: int, seed: int = 7, words_per_doc: int = 130) -> tuple[list[list[str]], list[str]]:
    rng = random.Random(seed)
    topics, general = make_vocab(rng)
    weights = [1.0 / (i + 1) for i in range(len(general))]
    cum = list(itertools.accumulate(weights))
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n_docs):
        t = rng.randrange(TOPICS)
        tw = topics[t]
        title = " ".join(rng.sample(tw, 4))
        body = []
        for _ in range(words_per_doc):
            if rng.random() < 0.35:
                body.append(rng.choice(tw))
            else:
                body.append(rng.choices(general, cum_weights=cum)[0])
        folder = root / f"d{i // 1000:03d}"
        folder.mkdir(exist_ok=True)
        (folder / f"doc{i:06d}.md").write_text(f"# {title}\n\ntopic {t}\n\n{' '.join(body)}\n")
    return topics, general


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    k = max(0, min(len(values) - 1, int(round(q / 100 * (len(values) - 1)))))
    return values[k]


def bench_latency(root: Path, n_docs: int, n_queries: int = 300) -> dict:
    t0 = time.perf_counter()
    topics, general = make_corpus(root, n_docs)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = index_corpus(root)
    index_s = time.perf_counter() - t0
    rng = random.Random(11)
    weights = [1.0 / (i + 1) for i in range(len(general))]
    queries = []
    for _ in range(n_queries):
        t = rng.randrange(TOPICS)
        k = rng.randint(3, 8)
        q = [rng.choice(topics[t]) if rng.random() < 0.6 else rng.choices(general, weights)[0] for _ in range(k)]
        queries.append(" ".join(q))
    corpus = Corpus(root)
    for q in queries[:20]:  # warm the page cache
        corpus.search(q, 5)
    times = []
    for q in queries:
        t0 = time.perf_counter()
        corpus.search(q, 5)
        times.append((time.perf_counter() - t0) * 1000)
    corpus.close()
    return {"docs": report.passages, "gen_s": gen_s, "index_s": index_s, "p50": pct(times, 50),
            "p99": pct(times, 99), "max": max(times)}


class ScriptedPredictor:
    """A server-side predictor without a model: forecasts by topic-word overlap with a
    hidden 'useful' topic, proposes no queries (so the server's own writer evolves them)."""

    name = "scripted"
    server_side = True

    def __init__(self, useful: set[str]):
        self.useful = useful

    async def score(self, req) -> ScoringResult:
        rows = []
        for d in req.documents:
            hits = sum(1 for w in d.content.split() if w in self.useful)
            rows.append(ScoreRow(document_id=d.id, predicted_score=1.0 + hits / 20, why="topic overlap"))
        return ScoringResult(rows=rows)

    async def write_queries(self, req) -> list[str]:
        return []

    async def decide(self, ask):
        return None

    async def aclose(self) -> None:
        return None


def tokens(obj) -> int:
    text = obj if isinstance(obj, str) else json.dumps(obj)
    return max(1, len(text) // 4)


async def bench_service(root: Path, db: Path) -> dict:
    rng = random.Random(5)
    topics, _ = make_vocab(random.Random(7))
    useful_topic = topics[3]
    question = " ".join(rng.sample(useful_topic, 5))
    out: dict = {}
    async with LocalKnowledgeStore.open(db, Actor(user="bench", client="bench")) as store:
        backends = BackendSet([LocalBackend([root])])

        # 1a. tokens per retrieve, server-side predictor
        svc = RetrievalService(store, ScriptedPredictor(set(useful_topic)), backends)
        run = await store.start_run(RunCreate(goal="synthetic", direction="maximize", x0=1.0))
        reply_tokens, raw_tokens = [], []
        for i in range(5):
            reply = await svc.search(SearchInput(run_id=run.id, parent_score=1.0, knowledge_state=KnowledgeState(
                open_questions=[" ".join(rng.sample(useful_topic, 5))])))
            state = await svc.rstore.get_search(reply.search_id)
            reply_tokens.append(tokens(reply.model_dump(mode="json")))
            raw_tokens.append(max(1, state.raw_chars // 4))
        out["server"] = (statistics.mean(reply_tokens), statistics.mean(raw_tokens))

        # 1b. tokens per retrieve, agent predictor (the agent reads to_score excerpts)
        agent = RetrievalService(store, AgentPredictor(), backends)
        run_b = await store.start_run(RunCreate(goal="synthetic", direction="maximize", x0=1.0))
        reply_tokens, raw_tokens = [], []
        for i in range(5):
            total = 0
            reply = await agent.search(SearchInput(run_id=run_b.id, parent_score=1.0, knowledge_state=KnowledgeState(
                open_questions=[" ".join(rng.sample(useful_topic, 5))])))
            total += tokens(reply.model_dump(mode="json"))
            while reply.status == "needs_scores":
                rows = [{"document_id": d.id, "predicted_score": 1.0 + (hash(d.id) % 100) / 100, "why": "x"}
                        for d in reply.to_score]
                reply = await agent.score_documents(ScoreInput(search_id=reply.search_id, scores=rows))
                total += tokens(reply.model_dump(mode="json"))
            state = await agent.rstore.get_search(reply.search_id)
            reply_tokens.append(total)
            raw_tokens.append(max(1, state.raw_chars // 4))
        out["agent"] = (statistics.mean(reply_tokens), statistics.mean(raw_tokens))

        # 3. repeated-URL rate over 30 iterations
        evolve_run = await store.start_run(RunCreate(goal="synthetic", direction="maximize", x0=1.0))
        ks = KnowledgeState(open_questions=[question])
        for _ in range(30):
            reply = await svc.search(SearchInput(run_id=evolve_run.id, parent_score=1.0, knowledge_state=ks,
                                                 config=SearchConfig(rounds=1)))
            ks = reply.knowledge_state
        evolve = await svc.stats(evolve_run.id)

        repeat_run = await store.start_run(RunCreate(goal="synthetic", direction="maximize", x0=1.0))
        fixed = [question, question + " implementation details", question + " benchmark results"]
        for it in range(30):
            for q in fixed:
                raw, _ = await backends.search(q, 5)
                await svc.rstore.record_query_results(QueryResultsCreate(
                    query=QueryCreate(run_id=repeat_run.id, search_id=None, round=it, text=q, backend="local",
                                      results=len(raw), new_documents=0), results=raw))
        repeat = await svc.stats(repeat_run.id)
        out["evolve"] = evolve
        out["repeat"] = repeat
        await backends.aclose()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="2k and 10k documents instead of 10k and 100k")
    args = ap.parse_args()
    sizes = (2_000, 10_000) if args.quick else (10_000, 100_000)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        lat = {n: bench_latency(tmp / f"corpus{n}", n) for n in sizes}
        svc = asyncio.run(bench_service(tmp / f"corpus{sizes[0]}", tmp / "knowledge.db"))

    rows = []
    s_reply, s_raw = svc["server"]
    a_reply, a_raw = svc["agent"]
    rows.append(("tokens to agent per retrieve (anthropic-style predictor)", f"{s_reply:.0f} vs {s_raw:.0f} raw",
                 f"{s_raw / s_reply:.1f}x fewer", ">= 5x", s_raw / s_reply >= 5))
    rows.append(("tokens to agent per retrieve (agent predictor)", f"{a_reply:.0f} vs {a_raw:.0f} raw",
                 f"{a_raw / a_reply:.1f}x fewer", ">= 5x", a_raw / a_reply >= 5))
    for n, r in lat.items():
        rows.append((f"local search, {r['docs']:,} passages (index {r['index_s']:.1f}s)",
                     f"p50 {r['p50']:.2f} ms", f"p99 {r['p99']:.2f} ms", "p99 <= 50 ms", r["p99"] <= 50))
    ev, rp = svc["evolve"], svc["repeat"]
    rows.append(("repeated-URL rate, 30 iterations, evolving queries",
                 f"{ev.results_returned} results", f"{ev.repeated_url_rate:.1%} ({ev.distinct_urls} distinct)",
                 "< repeating", ev.repeated_url_rate < rp.repeated_url_rate))
    rows.append(("repeated-URL rate, 30 iterations, repeated queries",
                 f"{rp.results_returned} results", f"{rp.repeated_url_rate:.1%} ({rp.distinct_urls} distinct)",
                 "", None))
    widths = [max(len(str(r[i])) for r in rows + [("measure", "value", "result", "target", "")]) for i in range(4)]
    header = ("measure", "value", "result", "target")
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths)) + " | ok")
    print("-+-".join("-" * w for w in widths) + "-+---")
    for r in rows:
        ok = "" if r[4] is None else ("yes" if r[4] else "NO")
        print(" | ".join(str(c).ljust(w) for c, w in zip(r[:4], widths)) + f" | {ok}")


if __name__ == "__main__":
    main()
