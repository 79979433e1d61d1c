"""Run a few OpenEvolve iterations on an evoteam program kit with EvoDuet's retrieval loop.

    pip install 'evoteam[openevolve]'
    evoteam corpus index ~/papers
    python examples/openevolve_retrieval.py circle_packing_26 --iterations 3 \\
        --model gpt-4o-mini --api-base https://api.openai.com/v1 --corpus ~/papers \\
        --question "how do the best known packings of 26 circles place the large circles?"

The kit may be a shipped kit's name or any OpenEvolve/SkyDiscover folder (evaluator.py,
initial_program.py, config.yaml). Every candidate, gate, search, forecast and outcome is
recorded in the evoteam store; afterwards:

    evoteam kb runs
    evoteam kb search "random search"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile

from evoteam.config import load_settings
from evoteam.errors import DomainError
from evoteam.integrations.openevolve import RetrievalOptions, run_openevolve


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kit", help="kit name or folder")
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--model", help="model name (default: the folder's config.yaml)")
    ap.add_argument("--api-base", help="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1")
    ap.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    ap.add_argument("--corpus", action="append", default=[], help="local corpus folder (repeatable)")
    ap.add_argument("--question", action="append", default=[], help="an open question (repeatable)")
    ap.add_argument("--decision", default="auto", choices=["auto", "no-op", "look-up", "retrieve"])
    ap.add_argument("--n", type=int, default=4, help="N: candidates per iteration when documents are used")
    ap.add_argument("--keep", type=int, default=3, help="D: documents put into the prompt")
    ap.add_argument("--rounds", type=int, default=2, help="R: search rounds")
    ap.add_argument("--output", default=None, help="OpenEvolve's output folder (default: a temporary one)")
    args = ap.parse_args()
    settings = load_settings()
    options = RetrievalOptions(
        db=str(settings.db), kit=args.kit, kits_dirs=[str(d) for d in settings.kits_dirs],
        corpus_dirs=args.corpus or [str(d) for d in settings.corpus_dirs], decision=args.decision,
        open_questions=args.question, n_candidates=args.n, keep=args.keep, rounds=args.rounds)
    output = args.output or tempfile.mkdtemp(prefix="openevolve-evoteam-")
    try:
        summary = asyncio.run(run_openevolve(args.kit, options, iterations=args.iterations, output_dir=output,
                                             model=args.model, api_base=args.api_base, api_key=args.api_key))
    except DomainError as exc:  # a kit that is not trusted or not found, a refused setting: one line
        sys.exit(f"error: {exc}")
    print(json.dumps(dict(summary, output_dir=output), indent=2))


if __name__ == "__main__":
    main()
