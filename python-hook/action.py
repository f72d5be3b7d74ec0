# A freeze action queued as a pending call (like boot.py: carried in memory, never a file):
# @ACTION@ is "freeze(C, N, R)" (C: a full collection first; N: count the frozen heap; R: a
# full collection after, which starts the old generation's counters again) or
# "unfreeze()", methods of the fork guard (neurogc_hook.py), which holds their logic and the
# record that tells the agent what happened. Nothing runs where no guard is.
for c in object.__subclasses__():
    if c.__name__ == "_NeurogcForkGuard" and c.__dict__.get("protocol") == 11:
        c.@ACTION@
        break
