"""Where an evaluation's score spread comes from: the raw rounds of N evaluations in a row.

For each evaluation of the kit's better example, per workload: the median raw round time of each
side (the fastest of its calls in a round, nothing subtracted), the path subtracted, the
fastest empty call and the spread of the rounds' fastest empty calls; then the score as the
product computes it (path subtracted) and as it would be with nothing or only the floor
subtracted, and the CV of each over the evaluations. An experiment, not a product check.
Usage: python benchmarks/bench_round_spread.py KIT N
"""
import asyncio, sys, tempfile, statistics, math, os
from pathlib import Path
from evoteam.config import load_settings
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kits import discover
from evoteam.servers.bench.measurement.session import KernelSession
settings = load_settings(); settings.db = Path(tempfile.mkdtemp()) / "kb.db"
kit = discover(settings)[sys.argv[1]]
path = str(kit.file(kit.manifest.examples["better"]))
got = []
real = KernelSession.measure_sides
def spy(self, wl, verdicts):
    r = real(self, wl, verdicts); got.append((wl.name, r)); return r
KernelSession.measure_sides = spy
scores = {k: [] for k in ("raw", "path", "floor")}
async def main():
    for i in range(int(sys.argv[2])):
        got.clear()
        e = await evaluate_candidate(settings, kit, candidate_path=path)
        per = {k: [] for k in scores}
        line = []
        for name, r in got:
            b = [x["baseline"] for x in r.per_round]; c = [x["candidate"] for x in r.per_round]
            p, f = r.path, r.floor
            for k, sub in (("raw", 0), ("path", p), ("floor", f)):
                per[k].append(statistics.median([(bb - sub) / (cc - sub) for bb, cc in zip(b, c)]))
            line.append(f"{name}: b {statistics.median(b)/1e3:.0f} c {statistics.median(c)/1e3:.0f} path {p/1e3:.0f} floor {f/1e3:.0f} nulls {min(r.round_nulls)/1e3:.0f}-{max(r.round_nulls)/1e3:.0f}")
        for k in scores:
            scores[k].append(math.exp(sum(map(math.log, per[k])) / len(per[k])))
        print(f"score {e.score:.3f} raw {scores['raw'][-1]:.3f} path {scores['path'][-1]:.3f} floor {scores['floor'][-1]:.3f} | " + " | ".join(line), flush=True)
    for k, v in scores.items():
        print(k, f"mean {statistics.mean(v):.3f} cv {statistics.stdev(v)/statistics.mean(v)*100:.1f}%")
    print(os.getloadavg())
asyncio.run(main())
