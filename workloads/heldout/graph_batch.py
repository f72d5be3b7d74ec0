# Serves: benchmarks, evaluation family (held out: networkx from PyPI).
"""Held-out evaluation family (written after the controller's last change, never used to tune
it): a graph-analytics batch job on a third-party pure-Python library, networkx (PyPI, pinned by
xtask).

Long-lived state: a road-network-like graph of --nodes nodes held in memory (networkx keeps
dicts of dicts: ≈ 4 tracked containers per node and edge). Every step takes a random region,
copies it as a subgraph, runs single-source shortest paths and betweenness on it (temporary
dicts, lists and heaps, alive for the step), and records a few results.

  python graph_batch.py [--nodes N] [--recipe none|static|gc-off]

Protocol as workloads/tuning/batch_job.py: prints "ready", reads "go WARMUP_SECONDS STEPS", runs unmeasured
steps for WARMUP_SECONDS, prints "measuring", runs STEPS steps, prints "result JSON".
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import networkx as nx  # noqa: E402

import workload  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=60_000)
    ap.add_argument("--recipe", default="none", choices=workload.RECIPES)
    args = ap.parse_args()
    rng = random.Random(11)
    graph = nx.connected_watts_strogatz_graph(args.nodes, 4, 0.1, seed=11)
    for u, v in graph.edges:
        graph.edges[u, v]["w"] = rng.uniform(1, 10)
    results = []
    workload.install()
    workload.apply_recipe(args.recipe)

    def step(i):
        start = (i * 7919) % args.nodes
        region = nx.single_source_shortest_path_length(graph, start, cutoff=9)
        sub = graph.subgraph(list(region)[:600]).copy()
        dist = nx.single_source_dijkstra_path_length(sub, start, weight="w")
        central = nx.betweenness_centrality(sub, k=8, seed=i)
        results.append((i, len(dist), max(central.values(), default=0.0)))
        if len(results) > 1000:
            del results[:500]

    workload.run_batch(step)


if __name__ == "__main__":
    main()
