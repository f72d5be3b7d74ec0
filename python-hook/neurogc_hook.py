"""neurogc's fork guard, installed once in the target: a child forked while neurogc steers gets
the application's own GC thresholds back at once.

How it gets here: the agent queues a pending call that runs python-hook/boot.py (carried in the
target's memory, never in a file) on the main thread. boot.py connects to the agent's abstract
Unix socket, checks that the peer is the agent's user, receives this source, runs it in a
namespace of its own and calls main(sock). main() installs the guard (or finds the one
an earlier agent installed), answers one line and closes the socket: about a millisecond on the
main thread, and then nothing of the hook runs until the process forks.

Why so little: the agent writes thresholds straight into the validated GC state through its
custodian process, which also puts them back if the agent dies. What only code inside the process
can do is act in a child the instant it is forked. The guard's record is a 64-byte bytearray the
custodian updates in the same write sequences as the thresholds (the agent finds its buffer from
id() and checks the object's type before writing):
  0:4  magic b"NG11"             4:8   active (1 while an agent steers)   8:12  agent pid (host)
  16:28 values neurogc set, A    28:40 values neurogc set, B              40:52 the original
  52:56 frozen: set once neurogc's gc.freeze() ran (and the collection after it, where asked) (0: neurogc froze nothing); the count
        gc.get_freeze_count() gave right after it where the agent asked for one, else 1
  56:60 undone: set once unfreeze() ran
  60:64 busy: how many times freeze() found a collection running and did nothing
  (int32 little-endian; A and B both hold what is in force, or the old and new value of a change)
In the child, each field that holds A or B goes back to the original; a field the application set
itself is left alone; a heap neurogc froze is unfrozen.
freeze() and unfreeze() are queued like boot.py, by python-hook/action.py; unfreeze() also runs
in a forked child. freeze(True) runs a full collection first, when one is due anyway, so that
the garbage waiting for it is not frozen with the live heap. By default nothing is collected
after the freeze, as after the application's own `gc.collect(); gc.freeze()`: the old
generation's counters go on counting the frozen heap, so the next full collection comes when the
application's own would have (a quarter of that heap promoted since) and walks all that was
promoted, a one-off; the ones after it are small and frequent. freeze(reset=True) collects right
after the freeze instead, which walks next to nothing (every generation was just moved to the
permanent one) and starts the counters again from the unfrozen heap: no one-off, and the small
ones from now on. The agent asks for it only where the model puts the one-off over the pause
budget within its horizon (the demo service's, 38-98 ms in-process, against 7-10 ms at most
with the reset); made always, evaluation draws whose one-off never came ran 21 and 1,263 small
full collections in 20 s where the recipe ran none. A pending call can run inside a collection
(from a gc.callbacks function or a finalizer), where gc.collect() does nothing: freeze() with a
collection before or after it then does nothing and says so in the record (busy), and the agent
queues it again. A plain freeze there is made: by the time a finalizer or the "stop" callback
runs, the collection has moved its survivors on and holds its garbage in a list of its own, so
the freeze is as if made after it (from the "start" callback, as if made before it). neurogc
freezes only while an agent steers, only when nothing is frozen yet (gc.unfreeze() releases
everything, so the undo could not spare what someone else froze), and only once. No count of
the frozen heap is taken unless the agent asks: gc.get_freeze_count() walks the whole permanent
generation with the GIL held (80-95 ms for a million objects on the document-search benchmark,
a stall every request then in flight waited out). So the undo cannot tell a later gc.freeze()
of the application's own from neurogc's: it releases both (docs/limits.md).

What stays for the life of the process: the guard class, its record and one os.register_at_fork()
callback (CPython cannot unregister it), once per process however many agents come. Nothing in
sys.modules (gc and _socket leave it as soon as they are imported, when the hook brought them
in), no thread, no file descriptor, nothing in gc.callbacks or __main__.

The answer: "hello 11 PID VERSION T0 T1 T2 FREEZE RECORD_ID ACTIVE AGENT_PID". Runs on 3.8-3.14.
"""
import sys

# A module the hook brings in leaves sys.modules at once: the hook keeps its own reference, and
# the application's view of sys.modules does not change (boot.py does the same with _socket).
_HAD_GC = "gc" in sys.modules
import gc  # noqa: E402

if not _HAD_GC:
    del sys.modules["gc"]
import posix  # noqa: E402

PROTOCOL = 11
_MAGIC = b"NG11"
_RECORD = 64
# MSG_NOSIGNAL: a send to a vanished agent must not raise SIGPIPE (fatal where it is SIG_DFL).
_NOSIGNAL = 0x4000


def _ints(record, off):
    return [int.from_bytes(record[off + 4 * i : off + 4 * i + 4], "little", signed=True) for i in range(3)]


def _guard():
    """The guard class: found again through object.__subclasses__(), or created and registered."""
    for cls in object.__subclasses__():
        if cls.__name__ == "_NeurogcForkGuard" and cls.__dict__.get("protocol") == PROTOCOL:
            return cls

    class _NeurogcForkGuard:
        protocol = PROTOCOL
        record = bytearray(_MAGIC + bytes(_RECORD - len(_MAGIC)))
        gc = gc
        ints = staticmethod(_ints)

        @staticmethod
        def child():
            cls = _NeurogcForkGuard
            r = cls.record
            cls.unfreeze()
            if r[4:8] == bytes(4):
                return
            r[4:8] = bytes(4)  # this child is nobody's to steer (same length: the buffer stays)
            a, b, original = cls.ints(r, 16), cls.ints(r, 28), cls.ints(r, 40)
            now = list(cls.gc.get_threshold())
            back = [original[i] if now[i] != original[i] and now[i] in (a[i], b[i]) else now[i] for i in range(3)]
            if back != now:
                cls.gc.set_threshold(*back)

        @staticmethod
        def freeze(collect=False, count=False, reset=False):
            cls = _NeurogcForkGuard
            r = cls.record

            def allowed():
                return r[4:8] != bytes(4) and r[52:56] == bytes(4) and cls.gc.get_freeze_count() == 0

            def collected(generation):
                # gc.collect() returns at once while a collection runs; the collector's own
                # count of collections tells.
                before = cls.gc.get_stats()[generation]["collections"]
                cls.gc.collect(generation)
                return cls.gc.get_stats()[generation]["collections"] > before

            if not allowed():
                return
            # With collect: the full collection that was due anyway, so that only live objects
            # are frozen. With reset: a young one, to know that none is running, so that the
            # one after the freeze cannot be refused. They run finalizers and gc.callbacks: what
            # those did (a freeze of their own, the agent gone) is checked again. A plain freeze
            # collects nothing: a young collection walks the whole young list, which outgrows
            # its count where objects die as fast as they come (an evaluation draw replacing
            # cache entries: 258 counted, 494 ms walked).
            if collect or reset:
                if not collected(2 if collect else 0):
                    r[60:64] = (int.from_bytes(r[60:64], "little") + 1).to_bytes(4, "little")
                    return
                if not allowed():
                    return
            cls.gc.freeze()
            if reset:
                # Nothing is running (the collection above ran): this one cannot be refused.
                cls.gc.collect()
            r[52:56] = (max(cls.gc.get_freeze_count(), 1) if count else 1).to_bytes(4, "little")

        @staticmethod
        def unfreeze():
            cls = _NeurogcForkGuard
            r = cls.record
            if r[52:56] != bytes(4):
                r[52:56] = bytes(4)
                cls.gc.unfreeze()
            r[56:60] = (1).to_bytes(4, "little")

    posix.register_at_fork(after_in_child=_NeurogcForkGuard.child)
    return _NeurogcForkGuard


def main(sock):
    try:
        guard = _guard()
        r = guard.record
        active = int.from_bytes(r[4:8], "little")
        agent = int.from_bytes(r[8:12], "little")
        original = list(gc.get_threshold())
        if not active:
            r[40:52] = b"".join(v.to_bytes(4, "little", signed=True) for v in original)
        freeze = gc.get_freeze_count() if hasattr(gc, "get_freeze_count") else 0
        line = "hello %d %d %s %d %d %d %d %d %d %d\n" % (
            PROTOCOL,
            posix.getpid(),
            sys.version.split()[0],
            original[0],
            original[1],
            original[2],
            freeze,
            id(r),
            active,
            agent,
        )
        sock.sendall(line.encode("ascii"), _NOSIGNAL)
    finally:
        sock.close()
