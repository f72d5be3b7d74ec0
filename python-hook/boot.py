import sys
h = "_socket" in sys.modules
import _socket
if not h:
    del sys.modules["_socket"]
s = _socket.socket(1, 1)
def r(n):
    b = b""
    while len(b) < n:
        x = s.recv(n - len(b))
        if not x:
            raise EOFError
        b += x
    return b
try:
    s.settimeout(2)
    s.connect("\0@NAME@")
    if int.from_bytes(s.getsockopt(1, 17, 12)[4:8], "little") == @UID@:
        g = {"__name__": "neurogc_hook"}
        exec(r(int(r(8))), g)
        g["main"](s)
        s = None
except BaseException:
    pass
if s is not None:
    s.close()
