# Serves: benchmarks, evaluation family (held out: bottle from PyPI).
"""Held-out evaluation family (never used to tune the controller): a web application on a
third-party framework, bottle (PyPI, pinned by xtask), served by the standard library's wsgiref.

Like a model-serving or session service: a warm state of --sessions user sessions (nested
dicts and lists, ≈ 7 tracked containers each: ≈ 1M by default), and every GET /work looks one up,
builds a response document of a few hundred nested dicts and lists (acyclic, alive until the
response is rendered, so young collections in the middle of a request promote them), renders it
with bottle's SimpleTemplate and JSON. Nothing here builds reference cycles on purpose; what the
framework's own request objects leave is what the collector sees.

  python web_service.py [--sessions N] [--items K] [--recipe none|static|gc-off]

Prints "ready PORT" once it listens. GET /stats as workloads/tuning/cache_service.py answers it.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import bottle  # noqa: E402

import workload  # noqa: E402

app = bottle.Bottle()
SESSIONS = {}
ARGS = None
SERVED = [0]
PAGE = bottle.SimpleTemplate(
    "<h1>{{user}}</h1><ul>\n% for item in items:\n<li>{{item['name']}}: {{item['score']}}</li>\n% end\n</ul>"
)


def build_sessions(n):
    for i in range(n):
        SESSIONS[i] = {
            "user": "user%d" % i,
            "roles": ["reader", "writer"] if i % 3 else ["reader"],
            "prefs": {"lang": "en", "tz": i % 24, "flags": [i % 2, i % 5]},
            "history": [(i, i + 1)],
        }


@app.get("/work")
def work():
    SERVED[0] += 1
    i = SERVED[0]
    session = SESSIONS[(i * 7919) % ARGS.sessions]
    items = [
        {"name": "item%d" % k, "score": (i * k) % 97, "tags": [k, k + 1], "meta": {"rank": k}}
        for k in range(ARGS.items)
    ]
    doc = {"user": session["user"], "roles": list(session["roles"]), "items": items}
    html = PAGE.render(user=session["user"], items=items[:20])
    body = json.dumps(doc)
    if i % 20 == 0:  # sessions come and go
        key = (i * 31) % ARGS.sessions
        SESSIONS[key] = dict(SESSIONS[key], history=[(i, len(body))])
    bottle.response.content_type = "application/json"
    return '{"bytes": %d, "html": %d}' % (len(body), len(html))


@app.get("/stats")
def stats():
    bottle.response.content_type = "application/json"
    return json.dumps(workload.stats_document(SERVED[0]))


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=150_000)
    ap.add_argument("--items", type=int, default=120)
    ap.add_argument("--recipe", default="none", choices=workload.RECIPES)
    ARGS = ap.parse_args()
    build_sessions(ARGS.sessions)
    workload.install()
    workload.apply_recipe(ARGS.recipe)
    workload.serve_wsgi(app)


if __name__ == "__main__":
    main()
