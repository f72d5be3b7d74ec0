"""The Python side of neurogc's one record type (neurogc-trace/src/record.rs): reads a `.ngc`
recording (zstd frames of JSON lines) or a `--json` stream, as the agent's reader does — lines that
are not the agent's are skipped, and a trace written in a newer format is refused.
"""
import io
import json

FORMAT = 1  # neurogc_trace::FORMAT
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def lines(path):
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(0)
        if head == ZSTD_MAGIC:
            import zstandard  # only recordings need it

            reader = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)
            yield from io.TextIOWrapper(reader, encoding="utf-8")
        else:
            yield from io.TextIOWrapper(f, encoding="utf-8")


def records(path):
    """Yields the records of a trace as dicts, each with its "type"."""
    attached = False
    for line in lines(path):
        if not line.startswith("{"):
            continue  # the target's own output, in a launch-mode --json stream
        d = json.loads(line)
        kind = d.get("type")
        if kind == "attach":
            if d.get("format", 1) > FORMAT:
                raise SystemExit(f"{path}: trace format {d['format']} is newer than {FORMAT}: upgrade training/")
            attached = True
        elif kind is None:
            continue
        elif not attached:
            raise SystemExit(f"{path}: a record before the attach record: not a neurogc trace")
        yield d
