# Serves: benchmarks: advise mode's steadiness on the demo service.
"""How steady advise mode's advice is on the README's demo service.

Runs workloads/tuning/demo_service.py for 60 s under `neurogc-agent --mode advise --json` (launch mode,
the embedded model, default budgets), then prints the advice window by window as it changed,
how many times it changed after its first recommendation (the target: at most twice), and the
recommendation the agent printed at exit.

  python3 workloads/bench/advise_demo.py [AGENT] [SECONDS]
"""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    agent = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/neurogc-agent")
    seconds = sys.argv[2] if len(sys.argv) > 2 else "60"
    result = os.path.join(ROOT, "target/advise-demo.json")
    out = subprocess.run(
        [agent, "--mode", "advise", "--json", "--", "/usr/bin/python3",
         os.path.join(ROOT, "workloads/tuning/demo_service.py"), "--seconds", seconds, "--result", result],
        capture_output=True, text=True, check=False)
    advice, recommendation = [], None
    for line in out.stdout.splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("type") == "decision":
            # What it would do, freeze with or without a collection first told apart.
            advice.append((tuple(r["thresholds"]), r.get("freeze"), "collect" in (r.get("what") or ""))
                          if r.get("change") else None)
        elif r.get("type") == "summary":
            recommendation = (r.get("policy") or {}).get("recommendation")
    runs = []
    for a in advice:
        if runs and runs[-1][0] == a:
            runs[-1][1] += 1
        else:
            runs.append([a, 1])
    for a, n in runs:
        what = "stay" if a is None else "/".join(map(str, a[0])) + (
            (" + collect, freeze" if a[2] else " + freeze") if a[1] else "")
        print(f"  {n:3d} window{'s' if n != 1 else ''}: {what}")
    first = next((i for i, (a, _) in enumerate(runs) if a is not None), None)
    changes = 0 if first is None else len(runs) - 1 - first
    print(f"windows: {len(advice)}; changes after the first recommendation: {changes}")
    print(f"recommendation at exit: {recommendation}")
    return 0 if out.returncode == 0 else out.returncode


if __name__ == "__main__":
    sys.exit(main())
