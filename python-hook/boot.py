import sys, _thread
h = "_socket" in sys.modules
import _socket
def b(s):
    try:
        s.settimeout(None)
        s.connect("\0@NAME@")
        if int.from_bytes(s.getsockopt(1, 17, 12)[4:8], "little") == @UID@:
            g = {"__name__": "neurogc_hook"}
            exec(s.recv(int(s.recv(8, 256)), 256), g)
            g["main"](s, h)
            return
    except BaseException:
        pass
    s.close()
_thread.start_new_thread(b, (_socket.socket(1, 1),))
