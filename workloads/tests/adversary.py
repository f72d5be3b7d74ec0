# Serves: tests: another local user attacking act mode (tests/adversary.rs).
"""A hostile local user for neurogc's adversarial test (run as an unprivileged user).

  python adversary.py SECONDS SENTINEL

1. Plants, for the next 400 PIDs, what worked against earlier neurogc versions: symlinks to
   SENTINEL and FIFOs at /tmp/neurogc-hook-N.py, /tmp/neurogc-inject-N.py, /tmp/neurogc-N.sock.
2. For SECONDS, watches /proc/net/unix for neurogc's abstract sockets and, for each one, tries to
   connect and talk to it as if it were the hook, and to bind the same name (possible only once
   the agent has let go of it) and listen there, in case a target still connects to it.
Prints one JSON line: names_seen, connected, bytes_received, squatted, lured (connections its
squatted names received), planted. Removes what it planted.
"""
import json
import os
import socket
import struct
import sys
import time

seconds, sentinel = float(sys.argv[1]), sys.argv[2]
last = int(open("/proc/sys/kernel/ns_last_pid").read())
planted = []
for n in range(last + 1, last + 400):
    for name, kind in ((f"/tmp/neurogc-hook-{n}.py", "link"), (f"/tmp/neurogc-inject-{n}.py", "fifo"), (f"/tmp/neurogc-{n}.sock", "link")):
        try:
            if kind == "link":
                os.symlink(sentinel, name)
            else:
                os.mkfifo(name)
            planted.append(name)
        except OSError:
            pass
seen, connected, received, lured = set(), 0, 0, 0
squats = {}
end = time.monotonic() + seconds
while time.monotonic() < end:
    for sq in squats.values():
        try:
            conn, _ = sq.accept()
            pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
            lured += pid != os.getpid()
            conn.close()
        except OSError:
            pass
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        parts = line.split()
        if len(parts) < 8 or not parts[7].startswith("@neurogc-"):
            continue
        name = "\0" + parts[7][1:]
        if name in squats:
            continue  # our own socket now
        seen.add(name)
        if name not in squats:
            squat = socket.socket(socket.AF_UNIX)
            try:
                squat.bind(name)
                squat.listen(8)
                squat.setblocking(False)
                squats[name] = squat
            except OSError:
                squat.close()
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(0.5)
        try:
            s.connect(name)
            connected += 1
            s.sendall(b"hello 4 1 3.11.2 1 1 1 0 4096 0 0\n")
            while True:
                data = s.recv(65536)
                if not data:
                    break
                received += len(data)
        except OSError:
            pass
        finally:
            s.close()
    time.sleep(0.001)
for name in planted:
    try:
        os.unlink(name)
    except OSError:
        pass
print(json.dumps({"names_seen": len(seen), "connected": connected, "bytes_received": received,
                  "squatted": len(squats), "lured": lured, "planted": len(planted)}), flush=True)
