# neurogc's gc.freeze(), queued as a pending call (like boot.py, carried in memory, never a file).
# It freezes only while an agent steers (the record's "active"), only when nothing is frozen yet
# (gc.unfreeze() releases everything, so the undo could not spare what someone else froze), and
# only once; the record's "frozen" field then holds the freeze count, which is
# how the agent, the undo (unfreeze.py) and the fork guard know neurogc froze.
import sys
h = "gc" in sys.modules
import gc
if not h:
    del sys.modules["gc"]
for c in object.__subclasses__():
    if c.__name__ == "_NeurogcForkGuard" and c.__dict__.get("protocol") == 5:
        r = c.record
        if r[4:8] != bytes(4) and r[52:56] == bytes(4) and gc.get_freeze_count() == 0:
            gc.freeze()
            r[52:56] = max(gc.get_freeze_count(), 1).to_bytes(4, "little")
        break
