"""One kernel in a plain process of its own, under each condition a timed worker differs in.

For the CPU kits' baseline and better example on one or two workloads: each condition in a fresh
process with the workers' allocator and thread settings (workerenv.tuning_env), 40 calls on fresh
inputs after 10 warm-up calls, printing the median and fastest call and the median minor page
faults per call (getrusage). Conditions: plain (the minimal harness's situation); pinned to CPU 1;
hold (the last call's outputs kept until the next call, as the worker does); memfd (inputs copied
into a shared memory mapping, as the worker's arena); rlimit (RLIMIT_AS of 4 GiB, as the sandbox
sets); seccomp (the workers' filter); alt (the other side's kernel called between calls, in the
same process); evict16/evict64 (16/64 MiB written between calls, as other processes' traffic);
all (pinned, hold, memfd, rlimit and seccomp together). An experiment, not a product check.

Usage: python benchmarks/bench_worker_conditions.py [condition,...]
"""
import json, os, subprocess, sys
from pathlib import Path
from evoteam.servers.bench.confinement.workerenv import tuning_env

CHILD = r"""
import json, os, sys, time, resource, mmap, statistics
import numpy as np
cfg = json.loads(sys.argv[1])
if cfg.get("pin"): os.sched_setaffinity(0, cfg["pin"])
if cfg.get("rlimit"): resource.setrlimit(resource.RLIMIT_AS, (4096 << 20, 4096 << 20))
if cfg.get("seccomp"):
    from evoteam.servers.bench.confinement import seccomp; seccomp.apply()
ns, mod = {}, {}
exec(open(cfg["inputs"]).read(), ns)
exec(open(cfg["kernel"]).read(), mod)
fn = mod["run"]
other = None
if cfg.get("alt"):
    m2 = {}
    exec(open(cfg["other"]).read(), m2)
    other = m2["run"]
names = cfg["names"]
views = None
held = None
times, faults = [], []
junk = np.ones(cfg["evict"] << 20, dtype=np.uint8) if cfg.get("evict") else None
for i in range(cfg["n"] + 10):
    if junk is not None:
        junk[::64] = i  # touch every line: evicts the last call's lines from L2/L3
    if other is not None:
        m0 = ns["make_inputs"](dict(cfg["axes"]), 1000 + i, "cpu")
        other(*[m0[k] for k in names]); del m0
    made = ns["make_inputs"](dict(cfg["axes"]), i, "cpu")
    args = [made[k] for k in names]
    if cfg.get("memfd"):
        if views is None:
            size = sum(a.nbytes + 64 for a in args if isinstance(a, np.ndarray))
            fd = os.memfd_create("x"); os.ftruncate(fd, size); mm = mmap.mmap(fd, size)
            views, off = [], 0
            for a in args:
                if isinstance(a, np.ndarray):
                    views.append(np.frombuffer(mm, dtype=a.dtype, count=a.size, offset=off).reshape(a.shape)); off += (a.nbytes + 63)//64*64
                else:
                    views.append(None)
        for j, a in enumerate(args):
            if views[j] is not None:
                views[j][...] = a
        args = [views[j] if views[j] is not None else a for j, a in enumerate(args)]
        del made
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t0 = time.perf_counter_ns()
    if cfg.get("hold"):
        held = None
        held = fn(*args)
    else:
        fn(*args)
    t1 = time.perf_counter_ns()
    f1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    if i >= 10:
        times.append(t1 - t0); faults.append(f1 - f0)
print(json.dumps({"med_us": statistics.median(times) / 1e3, "min_us": min(times) / 1e3, "faults": statistics.median(faults)}))
"""

KITS = Path(__file__).resolve().parents[1] / "task_kits"
cases = [("rmsnorm_cpu", {"num_tokens": 256, "hidden_size": 4096}, ["hidden_states", "weight", "eps"]),
         ("rmsnorm_cpu", {"num_tokens": 64, "hidden_size": 8192}, ["hidden_states", "weight", "eps"]),
         ("pairwise_distance_cpu", {"n": 256, "m": 1024, "d": 64}, ["x", "y"])]
conds = {"plain": {}, "pinned": {"pin": [1]}, "hold": {"hold": True}, "memfd": {"memfd": True},
         "rlimit": {"rlimit": True}, "seccomp": {"seccomp": True},
         "alt": {"alt": True}, "evict64": {"evict": 64}, "evict16": {"evict": 16}, "all": {"pin": [1], "hold": True, "memfd": True, "rlimit": True, "seccomp": True}}
only = sys.argv[1].split(",") if len(sys.argv) > 1 else list(conds)
env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(KITS.parent), **tuning_env(1)}
for kit, axes, names in cases:
    for side in ("baseline.py", "examples/better.py"):
        for c in only:
            cfg = dict(conds[c], inputs=str(KITS / kit / "inputs.py"), kernel=str(KITS / kit / side), axes=axes,
                       other=str(KITS / kit / ("examples/better.py" if side == "baseline.py" else "baseline.py")),
                       names=names, n=40)
            out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True, text=True, env=env)
            r = json.loads(out.stdout) if out.returncode == 0 else {"err": out.stderr[-300:]}
            print(f"{kit:<22} {str(list(axes.values())):<16} {side:<20} {c:<8} {r}", flush=True)
print("load", os.getloadavg())
