# Serves: benchmarks, tuning family (the memory-risky ETL batch).
"""A memory-risky ETL batch job for `cargo xtask bench steer` (standard library only; a tuning
family: written while the evidence-based controller was tuned, so it is not held out).

Reference tables held for the whole run (--tables rows, about four tracked containers each:
≈ 0.6M by default). Every step parses --records records, each holding a --payload buffer
(16 KiB by default) the collector does not track, joins them with the tables and aggregates them. A record points back
at its batch and the batch at its records: cycles that only the collector frees, payloads
included. A larger young generation keeps more payloads alive between collections: the process
touches more memory, and its own work slows although it spends less time collecting.

  python etl_batch.py [--tables N] [--records R] [--payload BYTES] [--recipe none|static|gc-off]

Protocol as workloads/tuning/batch_job.py (workloads/workload.py's run_batch).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import workload  # noqa: E402

class Batch:
    __slots__ = ("records", "summary")

    def __init__(self):
        self.records = []
        self.summary = {}


class Record:
    __slots__ = ("batch", "fields", "payload", "ref")

    def __init__(self, batch, key, payload):
        self.batch = batch
        self.fields = {"key": key, "tags": [key % 7, key % 11], "parts": [str(key), key * 2]}
        self.payload = payload
        self.ref = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tables", type=int, default=150_000)
    ap.add_argument("--records", type=int, default=40)
    ap.add_argument("--payload", type=int, default=16 * 1024)
    ap.add_argument("--recipe", default="none", choices=workload.RECIPES)
    args = ap.parse_args()
    tables = [{"id": i, "name": str(i), "attrs": [i, i % 13], "dims": {"a": i % 5}} for i in range(args.tables)]
    workload.install()
    workload.apply_recipe(args.recipe)

    def step(i):
        batch = Batch()
        for k in range(args.records):
            key = i * args.records + k
            # A fresh buffer each record, written once (bytes(...) alone could be shared pages).
            r = Record(batch, key, bytearray(args.payload))
            r.payload[key % args.payload] = 1
            r.ref = tables[key * 7919 % args.tables]
            batch.records.append(r)
        total = 0
        for r in batch.records:
            total += r.ref["attrs"][1] + len(r.fields["tags"]) + r.payload[0]
        batch.summary = {"total": total, "n": len(batch.records)}
        return total

    workload.run_batch(step)


if __name__ == "__main__":
    main()
