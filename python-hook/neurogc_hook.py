"""neurogc's actuator inside the target: applies GC thresholds for the agent, puts the originals
back when the agent goes away.

The agent injects this file (PEP 768 remote exec on 3.14+, Py_AddPendingCall on 3.8-3.13) with a
last line `start(SOCKET_PATH)`. Standard library only; runs on CPython 3.8-3.14.

Protocol: JSON lines over a Unix stream socket the agent listens on.
  hook -> agent, on connect: {"hello": 1, "pid": P, "original": [t0, t1, t2], "version": "3.x.y"}
  agent -> hook:  {"op": "set", "thresholds": [t0, t1, t2]} | {"op": "freeze"} | {"op": "restore"}
  hook -> agent:  {"ok": true, "old": [...], "new": [...], "freeze_count": N}
                  {"ok": false, "error": "..."}
On end of stream (the agent exited, crashed or was SIGKILLed) the original thresholds are restored
and the hook's thread ends. Only a peer running as root or as this process's user is obeyed.
"""
import gc
import json
import os
import socket
import struct
import sys
import threading

_STATE_ATTR = "_neurogc_hook_state"


def _freeze_count():
    return gc.get_freeze_count() if hasattr(gc, "get_freeze_count") else -1


def _serve(sock, original):
    reader = sock.makefile("r", encoding="utf-8")
    writer = sock.makefile("w", encoding="utf-8")

    def reply(obj):
        writer.write(json.dumps(obj) + "\n")
        writer.flush()

    reply({"hello": 1, "pid": os.getpid(), "original": list(original),
           "version": sys.version.split()[0], "freeze_count": _freeze_count()})
    for line in reader:
        try:
            msg = json.loads(line)
            op = msg.get("op")
            old = list(gc.get_threshold())
            if op == "set":
                t = [int(v) for v in msg["thresholds"]]
                if len(t) != 3 or min(t) < 0:
                    raise ValueError("thresholds must be three non-negative integers")
                gc.set_threshold(*t)
            elif op == "freeze":
                gc.freeze()
            elif op == "restore":
                gc.set_threshold(*original)
            elif op != "get":
                raise ValueError("unknown op %r" % (op,))
            reply({"ok": True, "old": old, "new": list(gc.get_threshold()),
                   "freeze_count": _freeze_count()})
        except Exception as exc:  # report, never die: the target must not notice us
            reply({"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)})


def _run(path, state):
    original = gc.get_threshold()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        pid, uid, gid = struct.unpack("3i", sock.getsockopt(
            socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        if uid not in (0, os.getuid()):
            return
        _serve(sock, original)
    except OSError:
        pass
    finally:
        # Whatever happened to the agent, the process gets its own settings back.
        gc.set_threshold(*original)
        try:
            sock.close()
        except OSError:
            pass
        with state["lock"]:
            state["thread"] = None


def start(path):
    """Starts the hook thread, unless one is already serving an agent (injection twice = one hook)."""
    state = getattr(sys, _STATE_ATTR, None)
    if state is None:
        state = {"lock": threading.Lock(), "thread": None}
        setattr(sys, _STATE_ATTR, state)
    with state["lock"]:
        if state["thread"] is not None and state["thread"].is_alive():
            return
        t = threading.Thread(target=_run, args=(path, state), name="neurogc-hook", daemon=True)
        state["thread"] = t
        t.start()
