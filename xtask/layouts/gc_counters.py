"""Measures where this interpreter keeps `long_lived_total` and `long_lived_pending`, and the
permanent generation's list head (what `gc.freeze()` moves objects into).

Run it with the interpreter to measure (as root is not needed; it reads its own memory):

    python3.14 xtask/layouts/gc_counters.py

It finds `generations[0].threshold` in the main interpreter's state by setting unusual
thresholds and looking for them 24 bytes apart (one `struct gc_generation` each) behind a linked
list head (copies of the thresholds elsewhere have none), then, after
two full collections (the second settles objects the first untracked lazily), looks for the
8-byte word equal to `len(gc.get_objects(2))` and checks that the next word counts promotions
into the oldest generation. Then it empties the permanent generation (`gc.unfreeze()`; 3.12's
collector keeps immortal objects there) and looks for the one list head, 4-byte aligned after the
generations, that links to itself while it is empty, and whose first object links back to it
once `gc.freeze()` has filled it. It prints the offsets from threshold0; the GC state's own offset
of threshold0 is `generations + 16` (neurogc-agent/src/interp/cpython.rs, `gc_layout`).
Needs /proc/self/maps (mount proc inside a chroot).
"""
import ctypes
import gc
import struct
import sys

PROBE = (12345, 77, 55)
STRIDE = 24  # sizeof(struct gc_generation): a PyGC_Head, threshold, count


def mapped_end(address):
    with open("/proc/self/maps") as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= address < hi:
                return hi
    sys.exit(f"{address:#x} is not mapped")


def word(address):
    return struct.unpack("<Q", ctypes.string_at(address, 8))[0]


def linked(head):
    """A list head 16 bytes before a generation's threshold: its first object links back to it
    (`_gc_prev` keeps flag bits in its low two bits). Copies of the thresholds elsewhere do not."""
    first = word(head)
    try:
        mapped_end(first + 8)
    except SystemExit:
        return False
    return word(first + 8) & ~3 == head


def main():
    try:
        get = ctypes.pythonapi.PyInterpreterState_Get
        get.restype = ctypes.c_void_p
        interp = get()
    except AttributeError:  # 3.8: the GC state is inside _PyRuntime itself
        interp = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    saved = gc.get_threshold()
    gc.set_threshold(*PROBE)
    blob = ctypes.string_at(interp, min(mapped_end(interp), interp + (1 << 20)) - interp)
    gc.set_threshold(*saved)
    found = [
        off
        for off in range(16, len(blob) - 2 * STRIDE - 4, 4)
        if all(struct.unpack_from("<i", blob, off + g * STRIDE)[0] == PROBE[g] for g in range(3))
        and linked(interp + off - 16)
    ]
    if len(found) != 1:
        sys.exit(f"threshold0 found at {found}, want exactly one place")
    threshold0 = interp + found[0]
    gc.collect()
    gc.collect()
    oldest = len(gc.get_objects(2))
    words = ctypes.string_at(threshold0, 512)
    at = [o for o in range(0, 512 - 8, 4) if struct.unpack_from("<q", words, o) == (oldest,)]
    keep = []
    for _ in range(10):
        keep.append([[] for _ in range(1000)])
        gc.collect(1)  # promotes the survivors into the oldest generation
    after = ctypes.string_at(threshold0, 512)
    # 10 lists of 1000 and their 10 holders, plus the few objects the loop itself promotes.
    pairs = [(o, struct.unpack_from("<qq", after, o)) for o in at]
    promoted = [(o, p) for o, (t, p) in pairs if t == oldest and 10010 <= p < 10100]
    print(f"{sys.version.split()[0]}: threshold0 at state+{found[0]}; ", end="")
    if len(promoted) != 1:
        sys.exit(f"no long_lived_total/pending pair: {oldest} objects; words {pairs}")
    (off, pending), = promoted
    print(f"long_lived_total at threshold0+{off}, long_lived_pending +8 ({pending} promoted); ", end="")
    print(f"permanent generation at threshold0+{permanent(threshold0)}")


def permanent(threshold0):
    """The permanent generation's head: linked to itself while empty, to the frozen list after a
    freeze (`_gc_prev` keeps flag bits in its low two bits), to itself again after an unfreeze."""
    heads = range(threshold0 + 8, threshold0 + 320, 4)  # after generations[0]'s threshold, count
    gc.unfreeze()
    empty = [h for h in heads if word(h) == h and word(h + 8) == h]
    gc.freeze()
    filled = [h for h in empty if word(h) != h and word(word(h) + 8) & ~3 == h]
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    found = [h for h in filled if word(h) == h]
    if len(found) != 1 or frozen == 0:
        sys.exit(f"permanent generation head at {found} after freezing {frozen}, want exactly one")
    return found[0] - threshold0


main()
