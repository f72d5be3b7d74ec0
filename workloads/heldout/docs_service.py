# Serves: benchmarks, evaluation family (held out: sortedcontainers, Jinja2 from PyPI).
"""Held-out evaluation family (written after the controller's rules, run once to evaluate, never
used to tune or train): a document search service on third-party code from PyPI, pinned by
xtask: an index kept in a sortedcontainers SortedDict, result pages rendered by Jinja2, served by
the standard library's wsgiref.

Like a catalogue or model-serving service: a warm index of --docs documents (a dict with nested
lists and dicts, ≈ 6 tracked containers each: ≈ 1.2M by default). Every GET /work takes a range of
--hits documents from the index, builds a result set of nested dicts and lists (acyclic, alive
until the page is rendered), ranks it, renders it with a Jinja2 template and serialises it to
JSON. One request in 25 re-indexes a document. What Jinja2's runtime leaves is what the
collector sees; nothing here builds cycles on purpose.

  python docs_service.py [--docs N] [--hits K] [--recipe none|static|gc-off]

Prints "ready PORT" once it listens. GET /stats as workloads/tuning/cache_service.py answers it.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import jinja2  # noqa: E402
from sortedcontainers import SortedDict  # noqa: E402

import workload  # noqa: E402

INDEX = SortedDict()
ARGS = None
SERVED = [0]
PAGE = jinja2.Environment(autoescape=True).from_string(
    "<h1>{{ query }}</h1><ol>{% for hit in hits %}"
    "<li>{{ hit.title }} ({{ hit.score }}){% for tag in hit.tags %} #{{ tag }}{% endfor %}</li>"
    "{% endfor %}</ol>"
)


def document(i, version=0):
    return {
        "id": i,
        "title": "document %d" % i,
        "tags": ["t%d" % (i % 50), "t%d" % (i % 7)],
        "fields": {"year": 1990 + i % 35, "lang": "en", "authors": ["a%d" % (i % 1000)]},
        "refs": [i - 1, i + 1, version],
    }


def build_index(n):
    for i in range(n):
        INDEX["k%08d" % (i * 7)] = document(i)


def search(i):
    start = "k%08d" % ((i * 7919) % (ARGS.docs * 7))
    hits = []
    for key in INDEX.irange(minimum=start):
        doc = INDEX[key]
        hits.append(
            {
                "title": doc["title"],
                "score": (i * doc["id"]) % 1000 / 10.0,
                "tags": list(doc["tags"]),
                "fields": dict(doc["fields"], authors=list(doc["fields"]["authors"])),
                "why": [{"term": t, "weight": len(t)} for t in doc["tags"]],
            }
        )
        if len(hits) == ARGS.hits:
            break
    hits.sort(key=lambda h: -h["score"])
    return hits


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if path == "/stats":
        body = json.dumps(workload.stats_document(SERVED[0])).encode()
    elif path == "/work":
        SERVED[0] += 1
        i = SERVED[0]
        hits = search(i)
        html = PAGE.render(query="q%d" % i, hits=hits[:30])
        doc = json.dumps({"query": i, "hits": hits})
        if i % 25 == 0:  # documents are re-indexed as they change
            key = "k%08d" % (((i * 31) % ARGS.docs) * 7)
            INDEX[key] = document(INDEX[key]["id"], version=i)
        body = b'{"bytes": %d, "html": %d}' % (len(doc), len(html))
    else:
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=200_000)
    ap.add_argument("--hits", type=int, default=300)
    ap.add_argument("--recipe", default="none", choices=workload.RECIPES)
    ARGS = ap.parse_args()
    build_index(ARGS.docs)
    workload.install()
    workload.apply_recipe(ARGS.recipe)
    # A production server's listen backlog (gunicorn's 2048; socketserver's 5 would drop the
    # connections that arrive during a long pause, and the client would retry 1 s later).
    workload.serve_wsgi(app, request_queue_size=1024)


if __name__ == "__main__":
    main()
