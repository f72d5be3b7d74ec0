# Serves: benchmarks: `bench fleet`'s paced processes.
"""One process of `cargo xtask bench fleet`: about RATE young collections per second, paced.

Every 10 ms it allocates small cycles until its own gc.callbacks count has reached RATE/100 more
collections (gen0, and every 10th a gen1 one), then sleeps until the next tick: a steady, cheap
collection rate that twenty processes can hold at once on a small machine (threshold0 is set
low, 50, so that a collection costs little). It counts its own collections with
gc.callbacks and prints the count when told (a line on stdin), so the benchmark can check the
agent saw them all.

  python fleet_load.py --rate 500
"""
import argparse
import gc
import sys
import threading
import time

THRESHOLD0 = 50
TICK = 0.01
count = [0]


def on_gc(phase, info):
    if phase == "stop":
        count[0] += 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rate", type=float, default=500.0)
    args = p.parse_args()
    gc.set_threshold(THRESHOLD0, 10, 10)
    gc.callbacks.append(on_gc)
    def load():
        nxt = time.monotonic()
        target = 0.0
        while True:
            target += args.rate * TICK
            while count[0] < target:
                for _ in range(10):
                    a = []
                    a.append(a)
            nxt += TICK
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                nxt = time.monotonic()

    threading.Thread(target=load, daemon=True).start()
    print("ready", flush=True)
    for _ in sys.stdin:
        print("count", count[0], flush=True)


main()
