"""neurogc's actuator inside the target: applies GC thresholds for the agent and gives the
application its own settings back when the agent goes away, however it goes.

How it gets here: the agent queues a pending call that runs python-hook/boot.py (carried in the
target's memory, never in a file). boot.py starts a thread, connects to the agent's abstract Unix
socket, checks that the peer is the agent's user, receives this source, runs it in a namespace of
its own and calls main(sock, had_socket). The target's __main__ is never used.

What it may leave behind: nothing in sys, no thread and no file descriptor once it ends. The one
thing CPython cannot undo is an os.register_at_fork() callback; it is registered once per process
(found again through object.__subclasses__() by a later hook) and does nothing while no hook runs.

Protocol: ASCII lines over the socket.
  hook -> agent on start:  "hello 2 PID VERSION T0 T1 T2 FREEZE" | "busy AGENTPID" (another agent
                           already steers this process; the hook then ends)
  agent -> hook:           "set T0 T1 T2" | "get" | "restore"
  hook -> agent:           "ok T0 T1 T2"        the thresholds now in force
                           "changed T0 T1 T2"   the application changed them since neurogc's last
                                                set: nothing applied, neurogc stops steering
                           "restored T0 T1 T2"  every field neurogc set is back to the original
                           "kept T0 T1 T2"      fields the application changed were left as they are
                           "err TEXT"
A "restore" ends the hook; so does end of stream (the agent exited, crashed or was SIGKILLed),
after the same per-field restore. Restores only touch fields that still hold what neurogc set.

Only modules every CPython has loaded at start-up are imported, plus gc (and _socket in boot.py),
which are dropped from sys.modules again at the end when the hook added them and nothing else
needs them. Standard library otherwise untouched; runs on CPython 3.8-3.14.
"""
import sys

_HAD_GC = "gc" in sys.modules
import gc  # noqa: E402
import posix  # noqa: E402
import _thread  # noqa: E402

PROTOCOL = 2
# MSG_NOSIGNAL: a send to a vanished agent must not raise SIGPIPE (fatal where it is SIG_DFL).
_NOSIGNAL = 0x4000


def _state():
    """The per-process state, created (and its at-fork callback registered) once per process."""
    for cls in object.__subclasses__():
        if cls.__name__ == "_NeurogcAtFork" and getattr(cls, "neurogc_protocol", None) == PROTOCOL:
            return cls

    class _NeurogcAtFork:
        neurogc_protocol = PROTOCOL
        lock = _thread.allocate_lock()
        active = False
        agent = 0
        original = None
        ours = None
        sock = None

        @staticmethod
        def restore():
            """Puts back every field that still holds neurogc's value; returns (now, all_back)."""
            cls = _NeurogcAtFork
            now = list(cls.gc.get_threshold())
            if cls.ours is None:
                return now, now == cls.original
            back = [cls.original[i] if now[i] == cls.ours[i] else now[i] for i in range(3)]
            if back != now:
                cls.gc.set_threshold(*back)
            cls.ours = None
            return back, back == cls.original

        @staticmethod
        def child():
            """After fork, in the child: the hook thread does not exist here; undo and let go."""
            cls = _NeurogcAtFork
            if not cls.active:
                return
            cls.active = False
            cls.lock = _thread.allocate_lock()
            try:
                cls.restore()
            except Exception:
                pass
            sock, cls.sock = cls.sock, None
            if sock is not None:
                try:
                    sock.close()  # the child's copy only: the parent's connection stays up
                except OSError:
                    pass

    _NeurogcAtFork.gc = gc
    posix.register_at_fork(after_in_child=_NeurogcAtFork.child)
    return _NeurogcAtFork


def _send(sock, text):
    sock.sendall(text.encode("ascii"), _NOSIGNAL)


def _lines(sock):
    buf = b""
    while True:
        i = buf.find(b"\n")
        if i >= 0:
            line, buf = buf[:i], buf[i + 1:]
            yield line.decode("ascii", "replace").split()
            continue
        chunk = sock.recv(4096)
        if not chunk:
            return
        buf += chunk
        if len(buf) > 65536:
            return  # not the agent talking


def _triple(words):
    t = [int(w) for w in words]
    if len(t) != 3 or min(t) < 0:
        raise ValueError("thresholds must be three non-negative integers")
    return t


def _fmt(t):
    return " ".join(str(v) for v in t)


def _handle(S, words):
    op = words[0] if words else ""
    now = list(gc.get_threshold())
    if op == "set":
        want = _triple(words[1:])
        expected = S.ours if S.ours is not None else S.original
        if now != expected:
            return "changed %s\n" % _fmt(now)
        gc.set_threshold(*want)
        S.ours = list(gc.get_threshold())
        return "ok %s\n" % _fmt(S.ours)
    if op == "get":
        return "ok %s\n" % _fmt(now)
    if op == "restore":
        back, all_back = S.restore()
        return "%s %s\n" % ("restored" if all_back else "kept", _fmt(back))
    raise ValueError("unknown request %r" % (op,))


def _forget_modules(had_socket):
    """Drops gc and _socket from sys.modules when this hook brought them in and nothing else
    uses them (gc keeps no state of its own; _socket stays if the application imported socket)."""
    try:
        if not had_socket and "socket" not in sys.modules:
            sys.modules.pop("_socket", None)
        if not _HAD_GC:
            sys.modules.pop("gc", None)
    except Exception:
        pass


def main(sock, had_socket):
    S = _state()
    with S.lock:
        busy = S.active
        if not busy:
            S.active, S.ours, S.sock = True, None, sock
            S.original = list(gc.get_threshold())
    try:
        sock.settimeout(None)
        if busy:
            _send(sock, "busy %d\n" % S.agent)
            return
        S.agent = int.from_bytes(sock.getsockopt(1, 17, 12)[0:4], "little")
        freeze = gc.get_freeze_count() if hasattr(gc, "get_freeze_count") else 0
        version = sys.version.split()[0]
        _send(sock, "hello %d %d %s %s %d\n" % (PROTOCOL, posix.getpid(), version, _fmt(S.original), freeze))
        for words in _lines(sock):
            try:
                reply = _handle(S, words)
            except Exception as exc:  # report, never die: the target must not notice us
                reply = "err %s: %s\n" % (type(exc).__name__, str(exc).replace("\n", " "))
            _send(sock, reply)
            if words[:1] == ["restore"]:
                break
    except Exception:
        pass
    finally:
        if not busy:
            with S.lock:
                if S.active and S.sock is sock:
                    try:
                        S.restore()
                    except Exception:
                        pass
                    S.active, S.sock, S.agent = False, None, 0
        try:
            sock.close()
        except OSError:
            pass
        _forget_modules(had_socket)
