# Serves: tests: act mode's safety and torture target, in a chosen state.
"""A target for neurogc's safety tests and torture harness: put into a given state, it reports
at the end what an injected hook might have left behind.

  python target.py STATE [--seconds S] [--report-thresholds SECS] [--set-at T] [--cycles]

States (what the main thread does while the agent acts):
  busy      churns containers (the collector runs often)
  sleep     sleeps in one long time.sleep() until S-1 s, then churns
  stdin     blocks in sys.stdin.readline() until a line (or EOF) arrives, then churns
  asyncio   an idle asyncio event loop until S-1 s, then churns
  shadow    like busy, with __main__ shadowing open, exec, compile, __import__, BaseException,
            Exception, print, int, bytes
  sigpipe   like busy, with SIGPIPE at SIG_DFL (a write to a closed socket would kill it)
  fork      like busy, forking a child every 0.3 s; each child reports its gc.get_threshold()
  appset    like busy, and at --set-at T the application sets thresholds 1234/5/6 itself
  backlog   a long young list (300,000 objects) whose count sits just under threshold0, as
            where objects die as fast as they come (each deallocation counts against the young
            generation wherever the object lived); the main thread runs without allocating, so
            any collection comes from code neurogc queued. Reports "queued_collections": the
            generation of each collection started from a pending call's code ("<string>")
  exec      like busy until S/2 and until its thresholds were changed (30 s at most), then
            execs a fresh interpreter that prints its own thresholds after 1.5 s as
            {"exec_thresholds": [...]}

--cycles: the churn leaves cyclic garbage over a 20,000-object long-lived heap, so the collector
runs, full collections take milliseconds and a pause budget has the agent freeze the heap.

It prints "ready <thresholds>" once set up and {"t", "thresholds"} lines with
--report-thresholds, then one final JSON line:
  thresholds, original, frozen and frozen_at_start (gc.get_freeze_count()), modules (names new in sys.modules since start), threads (OS threads
  now minus at start), fds (descriptors new since start), at_fork (neurogc at-fork classes),
  main_names (names in __main__ that neurogc could have left), children (fork state: the
  thresholds each forked child saw after the hook's at-fork callback ran).
It exits with os._exit(0) (no shutdown collection, no at-exit noise).
"""
import argparse
import gc
import json
import os
import signal
import sys
import time

ORIGINAL = list(gc.get_threshold())
# Not always 0: CPython 3.12 starts with 375 objects in the permanent generation.
FROZEN = gc.get_freeze_count()


def snapshot():
    return {
        "modules": set(sys.modules),
        "threads": len(os.listdir("/proc/self/task")),
        "fds": set(os.listdir("/proc/self/fd")),
    }


def churn(state, seconds):
    end = time.monotonic() + seconds
    rows = None
    cycles = state["cycles"]
    while time.monotonic() < end:
        for j in range(200):
            rows = [(j, {"j": j}) for _ in range(4)]
            if cycles:
                rows.append(rows)
        state["iterations"] = state.get("iterations", 0) + 200
        tick(state)
    return rows


def tick(state):
    now = time.monotonic()
    if state["report"] and now >= state["next_report"]:
        # sys.stdout, not print: the shadow state replaces print in this module's globals
        sys.stdout.write(json.dumps({"t": now - state["started"], "thresholds": list(gc.get_threshold())}) + "\n")
        sys.stdout.flush()
        state["next_report"] = now + state["report"]
    if state["set_at"] is not None and now - state["started"] >= state["set_at"]:
        gc.set_threshold(1234, 5, 6)
        state["set_at"] = None
    if state["fork_every"] and now >= state["next_fork"]:
        state["next_fork"] = now + state["fork_every"]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.write(w, json.dumps(list(gc.get_threshold())).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while True:
            chunk = os.read(r, 4096)
            if not chunk:
                break
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        state["children"].append({"parent": list(gc.get_threshold()), "child": json.loads(data)})


def backlog():
    """A long young list whose count sits just under threshold0; returns what keeps it alive
    and a function that runs S seconds without allocating and returns the generations of the
    collections started from queued code."""
    threshold0 = gc.get_threshold()[0]
    enabled = gc.isenabled()
    gc.disable()
    old = [[] for _ in range(300_000)]
    gc.collect()  # `old` leaves the young generation
    young = [[] for _ in range(300_000)]
    while gc.get_count()[0] > threshold0 - 100 and old:
        old.pop()  # a deallocation anywhere counts against the young generation
    if enabled:
        gc.enable()

    def run(seconds):
        queued = []

        def seen(phase, info):
            frame = sys._getframe(1) if phase == "start" else None
            while frame is not None:
                if frame.f_code.co_filename == "<string>":
                    queued.append(info["generation"])
                    break
                frame = frame.f_back

        gc.callbacks.append(seen)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
        gc.callbacks.remove(seen)
        return queued

    return (old, young), run


def main():
    p = argparse.ArgumentParser()
    p.add_argument(
        "state",
        choices=["busy", "sleep", "stdin", "asyncio", "shadow", "sigpipe", "fork", "appset", "backlog", "exec"],
    )
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--report-thresholds", type=float, default=0.0)
    p.add_argument("--set-at", type=float)
    p.add_argument("--cycles", action="store_true")
    args = p.parse_args()
    if args.state == "sigpipe":
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if args.state == "asyncio":
        import asyncio  # before the baseline: the application's own import
    before = snapshot()
    started = time.monotonic()
    state = {
        "started": started,
        "report": args.report_thresholds,
        "next_report": started,
        "set_at": args.set_at if args.state == "appset" else None,
        "fork_every": 0.3 if args.state == "fork" else 0.0,
        "next_fork": started,
        "children": [],
        "cycles": args.cycles,
        "heap": [(i, [i], {"i": i}) for i in range(20_000 // 3)] if args.cycles else None,
    }
    # Built before "ready": the agent attaches to the state, not to its making.
    _held, run_backlog = backlog() if args.state == "backlog" else (None, None)
    print("ready", json.dumps(ORIGINAL), flush=True)
    rest = args.seconds
    if args.state == "sleep":
        time.sleep(max(args.seconds - 1.0, 0.0))
        rest = 1.0
    elif args.state == "stdin":
        sys.stdin.readline()
        rest = 1.0
    elif args.state == "asyncio":
        loop = asyncio.new_event_loop()
        loop.call_later(max(args.seconds - 1.0, 0.0), loop.stop)
        loop.run_forever()
        loop.close()
        rest = 1.0
    elif args.state == "backlog":
        state["queued_collections"] = run_backlog(args.seconds)
        rest = 0.0
    elif args.state == "exec":
        # Exec while steered: on a loaded machine the agent's first change can come later than
        # S/2, and an exec before it would test nothing (30 s at most). A change seen at any
        # time counts: the agent may move back to the original thresholds before the target
        # looks (the likely cause of one CI run whose target never exec'd within the test's
        # deadline; not reproduced), and waiting for a second change outlasts that deadline.
        changed = False
        half = time.monotonic() + args.seconds / 2
        while time.monotonic() < half or (not changed and time.monotonic() < started + 30):
            churn(state, 0.05)
            changed = changed or gc.get_threshold() != tuple(ORIGINAL)
        code = (
            "import gc, json, sys, time; time.sleep(1.5); "
            "sys.stdout.write(json.dumps({'exec_thresholds': list(gc.get_threshold())}) + '\\n')"
        )
        os.execv(sys.executable, [sys.executable, "-c", code])
    elif args.state == "shadow":
        g = globals()
        for name in ("open", "exec", "compile", "__import__", "BaseException", "Exception", "print", "int", "bytes"):
            g[name] = None
    churn(state, rest)
    if args.state == "shadow":
        for name in ("open", "exec", "compile", "__import__", "BaseException", "Exception", "print", "int", "bytes"):
            del globals()[name]
    after = snapshot()
    report = {
        "thresholds": list(gc.get_threshold()),
        "original": ORIGINAL,
        "frozen": gc.get_freeze_count(),
        "frozen_at_start": FROZEN,
        "iterations": state.get("iterations", 0),
        "modules": sorted(after["modules"] - before["modules"]),
        "threads": after["threads"] - before["threads"],
        "fds": sorted(after["fds"] - before["fds"], key=int),
        "at_fork": sum(1 for c in object.__subclasses__() if c.__name__ == "_NeurogcAtFork"),
        "main_names": sorted(n for n in globals() if "neurogc" in n),
        "children": state["children"],
        "queued_collections": state.get("queued_collections"),
    }
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    os._exit(0)


main()
