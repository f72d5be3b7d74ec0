# Serves: benchmarks: what the garbage census costs a GC-heavy loop.
"""What the garbage census costs the target, measured side by side.

A loop that breaks four cycles a round (three `__slots__` pairs, a `__dict__` self-cycle, a
closure) runs for a fixed number of rounds in four arms, interleaved round by round: alone,
observed without a census, with a census every second (`--census 1`, the most the agent
allows: censuses back to back), and at the default sampling (`--census`, every 60 s). Each
run's time is the loop's own (perf_counter around it); each arm's collections are counted by
the loop's interpreter (the arms collect alike: the agent changes nothing in observe mode).

Prints each arm's median time, its ratio to the observed arm, the censuses run and how long
each walk held its collection (walk_ns), against the median pause of the collections around
it. The cost of one census, and so of a minute at the default sampling, follows from the
census-every-second arm: (its time - the observed time) / its censuses, which is noise where it
is within the spread of the runs (printed); the walks' own time is measured by the kernel.

  python3 workloads/bench/census_cost.py [AGENT] [ROUNDS] [REPEATS] [PYTHON]

PYTHON is the interpreter the loop runs on (/usr/bin/python3 by default; the free-threaded
build's census walks another shape of garbage).
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = "/usr/bin/python3"

LOOP = r"""
import gc, sys, time
class Tok:
    __slots__ = ("parent", "kids")
class Node:
    pass
def closure_cycle():
    def f():
        return f
    return f
def churn(n):
    for i in range(n):
        for _ in range(3):
            a, b = Tok(), Tok()
            a.parent, b.parent, a.kids, b.kids = b, a, [], []
        x = Node(); x.me = x
        closure_cycle()
time.sleep(0.5)  # the agent attached and its first window open before the loop
t = time.perf_counter(); churn(int(sys.argv[1])); el = time.perf_counter() - t
print(json.dumps({"seconds": el, "collections": sum(s["collections"] for s in gc.get_stats())}), file=sys.stderr, flush=True)
"""

ARMS = [
    ("alone", None),
    ("observed", ["--mode", "observe"]),
    ("census every 1 s", ["--mode", "observe", "--census", "1"]),
    ("census default (60 s)", ["--mode", "observe", "--census"]),
]


def run(agent, args, script, rounds):
    cmd = [PYTHON, "-c", "import json\n" + open(script).read(), rounds]
    records = []
    if args is None:
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        stderr = out.stderr
    else:
        out = subprocess.run([agent, *args, "--json", "--", *cmd], capture_output=True, text=True, check=True)
        stderr = out.stderr
        for line in out.stdout.splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                pass
    result = next(json.loads(l) for l in stderr.splitlines() if l.startswith('{"seconds"'))
    censuses = [r for r in records if r.get("type") == "census"]
    pauses = [r["duration_ns"] for r in records if r.get("type") == "gc" and "duration_ns" in r]
    return result, censuses, pauses


def main():
    agent = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/neurogc-agent")
    rounds = sys.argv[2] if len(sys.argv) > 2 else "2000000"
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    global PYTHON
    PYTHON = sys.argv[4] if len(sys.argv) > 4 else PYTHON
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(LOOP)
        script = f.name
    times = {name: [] for name, _ in ARMS}
    collections = {name: [] for name, _ in ARMS}
    walks, pauses, censuses_in = [], [], 0
    try:
        for _ in range(repeats):
            for name, args in ARMS:
                result, censuses, gc_pauses = run(agent, args, script, rounds)
                times[name].append(result["seconds"])
                collections[name].append(result["collections"])
                if name == "census every 1 s":
                    censuses_in += len(censuses)
                    walks += [c.get("walk_ns", 0) for c in censuses]
                    pauses += gc_pauses
    finally:
        os.unlink(script)
    base = statistics.median(times["observed"])
    print(f"{rounds} rounds, {repeats} runs per arm, interleaved; {PYTHON}")
    for name, _ in ARMS:
        m = statistics.median(times[name])
        print(f"  {name:24} {m:7.3f} s  x{m / base:.3f} of observed  "
              f"collections {statistics.median(collections[name]):.0f}  runs {' '.join(f'{t:.2f}' for t in times[name])}")
    per_run = censuses_in / repeats
    extra = statistics.median(times["census every 1 s"]) - base
    print(f"  censuses per run (every 1 s): {per_run:.1f}; walks {len(walks)}, "
          f"median {statistics.median(walks) / 1e3 if walks else 0:.0f} us, max {max(walks, default=0) / 1e3:.0f} us; "
          f"median pause {statistics.median(pauses) / 1e3 if pauses else 0:.0f} us, "
          f"max {max(pauses, default=0) / 1e3:.0f} us")
    if per_run > 0:
        # A difference of medians: below the runs' spread it is noise (negative, even).
        per_census = extra / per_run
        print(f"  per census, from the medians: {per_census * 1e3:.1f} ms of the loop's time; "
              f"at one a minute: {per_census / 60 * 100:.3f}% of a minute")


main()
