"""Measures where this interpreter keeps an instance's attributes, for the garbage census's
closing edges (which attribute of a Python class's instance points back into its cycle).

Run it with the interpreter to measure (it reads only its own memory):

    python3.14 xtask/layouts/instances.py

It prints one JSON line:
- `cached_keys`: the offset in a class (`PyHeapTypeObject`) of `ht_cached_keys`, the keys its
  instances share: found as the word after `ht_qualname`, the one word of a nested class that
  points to its `__qualname__` (which differs from its `__name__`).
- `keys_entries`, `entry_bytes`: where a keys object's entries begin, and their size: found by
  the keys `a` and `b` of a class whose instances set them in that order. `keys_entries` is
  "log2" where the indices before the entries take `1 << dk_log2_index_bytes` bytes (byte 9 of
  the keys object, 3.11+), or "size" where they take `dk_size` (at 8) times the width of an
  index (3.8-3.10).
- `values`: how an instance's attribute values are reached from the object: "inline" (an
  array 8 bytes after the object's header, 3.13+: "inline+24", or "inline+40" with a
  free-threaded build's larger header), "tagged" (the word 24 bytes before the
  object is the values array minus one, 3.12), "pointer" (the word 32 bytes before it points
  to the array, 3.11), or "dict" (the object's `__dict__` at `tp_dictoffset`, whose values
  array is at `ma_values`, 3.8-3.10).
- `managed_dict`: where, from the object, the pointer to an instance's own `__dict__` is once
  one is made (3.11+: -24, or -8 in a free-threaded build, whose objects have no `PyGC_Head`
  before them); null where `__dict__` is at the class's `tp_dictoffset` (3.8-3.10).
"""
import ctypes
import json
import struct
import sys


def word(address):
    return struct.unpack("<Q", ctypes.string_at(address, 8))[0]


def mapped(address):
    """Whether 16 bytes at `address` can be read (a stray word is not dereferenced)."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= address and address + 16 <= hi and line.split()[1][0] == "r":
                return True
    return False


class Outer:
    class Inner:
        pass


class Pair:
    pass


def main():
    inner = Outer.Inner
    size = type(inner).__basicsize__
    qualname = [o for o in range(0, size, 8) if word(id(inner) + o) == id(inner.__qualname__)]
    if len(qualname) != 1:
        sys.exit(f"ht_qualname at {qualname}, want exactly one place")
    cached_keys = qualname[0] + 8
    # A keys object shared by the instances appears once one has its attributes.
    a, b = object(), object()
    p = Pair()
    p.a, p.b = a, b
    keys = word(id(Pair) + cached_keys)
    if keys == 0:
        sys.exit("Pair has no cached keys after an instance set its attributes")
    blob = ctypes.string_at(keys, 512)
    at = {
        name: [o for o in range(0, 512 - 8, 8) if struct.unpack_from("<Q", blob, o)[0] == id(name)]
        for name in (sys.intern("a"), sys.intern("b"))
    }
    if len(at["a"]) != 1 or len(at["b"]) != 1:
        sys.exit(f"keys 'a' and 'b' at {at} in the cached keys, want one place each")
    entry_bytes = at["b"][0] - at["a"][0]
    # An entry is (hash, key, value) or (key, value): the key is 8 bytes in, or at its start.
    first = at["a"][0] - (8 if entry_bytes == 24 else 0)
    log2_index_bytes = blob[9]
    if first == 32 + (1 << log2_index_bytes):
        keys_entries = "log2"
    elif first == 40 + word(keys + 8):  # dk_size one-byte indices: a small table
        keys_entries = "size"
    else:
        sys.exit(f"entries at keys+{first}: neither after 1 << byte 9 nor after dk_size")
    values = values_at(p, a, b)
    print(json.dumps({
        "version": sys.version.split()[0],
        "cached_keys": cached_keys,
        "keys_entries": keys_entries,
        "entry_bytes": entry_bytes,
        "values": values,
        "managed_dict": managed_dict(values),
    }))


def managed_dict(values):
    """Where an instance's `__dict__`, once asked for, is pointed to from before it."""
    if values == "dict":
        return None
    q = Pair()
    q.a = 1
    d = q.__dict__
    at = [o for o in range(-40, 0, 8) if word(id(q) + o) == id(d)]
    if len(at) != 1:
        sys.exit(f"the managed __dict__ at {at} before the object, want one place")
    return at[0]


def values_at(p, a, b):
    """How `p`'s values array (a, b) is reached from `p`."""
    def holds(array):
        return mapped(array) and word(array) == id(a) and word(array + 8) == id(b)

    obj = id(p)
    inline = sys.getsizeof(object()) + 8  # after the header and 4 bytes of sizes and flags
    if holds(obj + inline):
        return f"inline+{inline}"
    if word(obj - 24) & 1 and holds(word(obj - 24) + 1):
        return "tagged"
    if holds(word(obj - 32)):
        return "pointer"
    offset = ctypes.c_ssize_t.from_address(id(Pair) + 288).value  # tp_dictoffset
    if offset > 0 and mapped(word(obj + offset)) and holds(word(word(obj + offset) + 40)):
        return "dict"
    sys.exit("the values of an instance were found by none of the known ways")


main()
