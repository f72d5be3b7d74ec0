# Serves: tests: the fork guard.
"""The fork guard's freeze() against the collector itself, with no agent: the guard's source
(python-hook/neurogc_hook.py) arrives on stdin, as the agent sends it.

Called once from inside a collection (a gc.callbacks function, where gc.collect() does nothing)
and once outside, then once asked to count the frozen heap, then plainly (no collection) outside
and inside a collection, then without and with the collection after the freeze while objects are
promoted. Prints one JSON line.
Serves the tests only (neurogc-agent/tests/safety.rs).
"""
import gc
import json
import sys

namespace = {}
exec(compile(sys.stdin.read(), "neurogc_hook.py", "exec"), namespace)
guard = namespace["_guard"]()
record = guard.record
record[4:8] = (1).to_bytes(4, "little")  # as the agent's custodian marks it: an agent steers
heap = [[i] for i in range(200_000)]


def full_collections():
    return gc.get_stats()[2]["collections"]


def word(offset):
    return int.from_bytes(record[offset : offset + 4], "little")


report = {"frozen_at_start": gc.get_freeze_count()}


def callback(phase, info):
    if phase == "start" and "inside" not in report:
        guard.freeze(True)
        report["inside"] = {"frozen": gc.get_freeze_count(), "busy": word(60)}


gc.callbacks.append(callback)
gc.collect()
gc.callbacks.remove(callback)
before = full_collections()
guard.freeze(True)
report["outside"] = {
    "frozen": gc.get_freeze_count(),
    "record": word(52),
    "busy": word(60),
    "full_collections": full_collections() - before,
}
guard.unfreeze()
report["after_unfreeze"] = gc.get_freeze_count()
# Asked to count (where the agent cannot estimate the heap), the record holds the count.
guard.freeze(False, True)
report["counted"] = {"frozen": gc.get_freeze_count(), "record": word(52)}
guard.unfreeze()
report["after_second_unfreeze"] = gc.get_freeze_count()


def collections():
    return [s["collections"] for s in gc.get_stats()]


# A plain freeze runs no collection: not even a young one, which walks the whole young list,
# however few objects its count says it holds (here 100,000 kept while as many older ones died).
# The collector is disabled throughout, so that any collection counted is one the guard ran.
old_ones = [[i] for i in range(100_000)]
gc.collect()
gc.disable()
young_ones = [[i] for i in range(100_000)]
del old_ones
before = collections()
guard.freeze()
report["plain"] = {
    "frozen": gc.get_freeze_count(),
    "collections": [a - b for a, b in zip(collections(), before)],
    "busy": word(60),
}
gc.enable()
guard.unfreeze()
del young_ones


# From inside a collection, once it has moved its survivors on ("stop"), a plain freeze is made.
def stop_callback(phase, info):
    if phase == "stop" and "plain_inside" not in report:
        guard.freeze()
        report["plain_inside"] = {"frozen": gc.get_freeze_count(), "busy": word(60)}


gc.callbacks.append(stop_callback)
gc.collect()
gc.callbacks.remove(stop_callback)
guard.unfreeze()


def promoting(reset):
    """Full collections around the freeze, and while 16,000 objects are kept at 100/10/10: gen2's
    count passes threshold2 after about 12,100 allocations, and a full collection then runs only
    where the old generation's counters hold less than four times what was promoted."""
    gc.collect()
    before = full_collections()
    guard.freeze(True, False, reset)
    out = {"frozen": gc.get_freeze_count(), "around": full_collections() - before}
    old = gc.get_threshold()
    gc.set_threshold(100, 10, 10)
    start = full_collections()
    kept = [[i] for i in range(16_000)]
    out["while_promoting"] = full_collections() - start
    gc.set_threshold(*old)
    del kept
    guard.unfreeze()
    return out


report["no_reset"] = promoting(False)
report["reset"] = promoting(True)
print(json.dumps(report), flush=True)
