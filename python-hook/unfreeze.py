# Undoes neurogc's gc.freeze(), queued as a pending call by the agent when it stops or by its
# custodian when the agent dies. Only as far as neurogc froze: if the permanent generation holds
# more than neurogc put there, the application froze too, and it stays frozen. Marks the record's
# "undone" field either way, so the agent knows it ran.
import sys
h = "gc" in sys.modules
import gc
if not h:
    del sys.modules["gc"]
for c in object.__subclasses__():
    if c.__name__ == "_NeurogcForkGuard" and c.__dict__.get("protocol") == 5:
        r = c.record
        n = int.from_bytes(r[52:56], "little")
        if n:
            r[52:56] = bytes(4)
            if gc.get_freeze_count() <= n:
                gc.unfreeze()
        r[56:60] = (1).to_bytes(4, "little")
        break
