"""Trains neurogc's default policy model from recorded traces. Seeded: the same traces give the
same model, byte for byte.

  python train.py TRACES_DIR OUT.onnx CARD.md

TRACES_DIR holds one `neurogc-agent record --mode observe` recording per (profile, action,
repeat), named PROFILE__T0-T1-T2__R.ngc, each of tests/workloads/profiles.py run under fixed
thresholds (cargo xtask train records them). For every profile the run cost of each action is

    cost = gc_share + 0.01 * p99_pause_ms + 2 * rss_growth

(time lost to the collector, tail pauses, and memory growth relative to the profile's run under
the interpreter default 700/10/10), and every window of every run of that profile is labelled
with the action of least cost: "seeing this, the best thresholds are these" — whatever
thresholds the window was recorded under (they are features too).

The model class is chosen by measurement: each profile is held out in turn (trained on the others,
tested on it), and the class with the least held-out regret is the one shipped — a constant
policy (the guard alone moves) included, so that a model that does not generalise is not shipped.
"""
import glob
import hashlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import onnx  # noqa: E402
import onnx_model  # noqa: E402
import records  # noqa: E402

ACTIONS = [(700, 10, 10), (2000, 10, 10), (5000, 10, 10), (10000, 10, 10), (25000, 20, 10), (60000, 20, 20)]
HISTORY = 8
HIDDEN = 32
SEED = 20261121
W_GC, W_P99_MS, W_RSS = 1.0, 0.01, 2.0


def load_run(path):
    windows, pauses, schema, names = [], [], None, None
    for d in records.records(path):
        if d.get("type") == "attach":
            schema, names = d["schema"], d["features"]
        elif d.get("type") == "window":
            windows.append(d)
        elif d.get("type") == "gc":
            pauses.append(d["duration_ns"])
    return schema, names, windows, pauses


REPORT = os.path.join(os.path.dirname(__file__), "..", "bench", "results", "steer", "report.md")


def closed_loop(model_path):
    """The targets table of the committed steering benchmark, if that run measured this very
    model (its report names the model's SHA-256); otherwise how to measure it."""
    digest = hashlib.sha256(open(model_path, "rb").read()).hexdigest()
    text = open(REPORT).read() if os.path.exists(REPORT) else ""
    if f"sha256 {digest}" not in text:
        return ["Not measured yet for this model: run `cargo xtask bench steer` and commit its",
                "target/bench-steer/ as bench/results/steer/, then train again to include it here."]
    targets = text.split("## Targets\n", 1)[1].split("\n## ", 1)[0].strip().splitlines()
    return ["Four workloads no training run has seen (bench/: cache service, batch job, memory risk,",
            "phases), act mode with this model and the guard's default budgets, against CPython's",
            "defaults, the static recipe and GC off (bench/results/steer/report.md, with plots):",
            "", *targets]


def history(feats, i):
    """The last HISTORY windows up to i, the oldest repeated at the start (as the agent does)."""
    return np.array([feats[max(j, 0)] for j in range(i - HISTORY + 1, i + 1)])


def main():
    traces, out_path, card_path = sys.argv[1:4]
    runs = {}
    schema = names = None
    digests = []
    for path in sorted(glob.glob(os.path.join(traces, "*.ngc"))):
        digests.append((os.path.basename(path), hashlib.sha256(open(path, "rb").read()).hexdigest()[:16]))
        profile, action, _repeat = os.path.basename(path)[:-4].split("__")
        action = tuple(int(v) for v in action.split("-"))
        schema, names, windows, pauses = load_run(path)
        if len(windows) < 2:
            raise SystemExit(f"{path}: too few windows")
        windows = windows[1:]  # the first window holds start-up
        f = [w["features"] for w in windows]
        gc_share = float(np.mean([x[names.index("gc_share")] for x in f]))
        p99_ms = float(np.percentile(pauses, 99) / 1e6) if pauses else 0.0
        rss = max(x[names.index("rss_mib")] for x in f)
        runs.setdefault(profile, []).append(
            {"action": ACTIONS.index(action), "features": f,
             "gc_share": gc_share, "p99_ms": p99_ms, "rss": rss})
    n_features = len(names)

    # Cost per (profile, action), averaged over repeats; RSS growth against the default's.
    costs, best = {}, {}
    for profile, rs in runs.items():
        base_rss = np.mean([r["rss"] for r in rs if r["action"] == 0])
        per_action = {}
        for r in rs:
            c = W_GC * r["gc_share"] + W_P99_MS * r["p99_ms"] + W_RSS * max(r["rss"] / base_rss - 1.0, 0.0)
            r["cost"] = c
            per_action.setdefault(r["action"], []).append(c)
        costs[profile] = {a: float(np.mean(c)) for a, c in per_action.items()}
        best[profile] = min(costs[profile], key=costs[profile].get)

    def dataset(profile_ok):
        xs, ys, meta = [], [], []
        for profile, rs in runs.items():
            if not profile_ok(profile):
                continue
            for r in rs:
                for i in range(len(r["features"])):
                    xs.append(history(r["features"], i))
                    ys.append(best[profile])
                    meta.append(profile)
        return np.array(xs, np.float64), np.array(ys), meta

    rng = np.random.default_rng(SEED)
    x_all, y_all, _ = dataset(lambda p: True)
    scaled = np.arcsinh(x_all)
    mean = scaled.reshape(-1, n_features).mean(axis=0)
    std = scaled.reshape(-1, n_features).std(axis=0) + 1e-3

    def prep(x):
        return ((np.arcsinh(x) - mean) / std).reshape(len(x), -1)

    def train_mlp(x, y, steps=3000, lr=0.01, l2=1e-3):
        d, k = x.shape[1], len(ACTIONS)
        w1 = rng.normal(0, np.sqrt(2 / d), (d, HIDDEN)); b1 = np.zeros(HIDDEN)
        w2 = rng.normal(0, np.sqrt(1 / HIDDEN), (HIDDEN, k)); b2 = np.zeros(k)
        params = [w1, b1, w2, b2]
        m = [np.zeros_like(p) for p in params]; v = [np.zeros_like(p) for p in params]
        onehot = np.eye(k)[y]
        for t in range(1, steps + 1):
            h_pre = x @ w1 + b1; h = np.maximum(h_pre, 0); s = h @ w2 + b2
            p = np.exp(s - s.max(axis=1, keepdims=True)); p /= p.sum(axis=1, keepdims=True)
            g_s = (p - onehot) / len(x)
            g_w2 = h.T @ g_s + l2 * w2; g_b2 = g_s.sum(axis=0)
            g_h = g_s @ w2.T * (h_pre > 0)
            g_w1 = x.T @ g_h + l2 * w1; g_b1 = g_h.sum(axis=0)
            for i, g in enumerate([g_w1, g_b1, g_w2, g_b2]):
                m[i] = 0.9 * m[i] + 0.1 * g; v[i] = 0.999 * v[i] + 0.001 * g * g
                params[i] -= lr * (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8)
        return params

    def train_linear(x, y, steps=3000, lr=0.01, l2=1e-3):
        """Softmax regression, written as the same two-layer graph: relu(x) - relu(-x) = x, so
        hidden = relu([x, -x]) and w2 = [W; -W] compute x @ W + b exactly."""
        d, k = x.shape[1], len(ACTIONS)
        w = np.zeros((d, k)); b = np.zeros(k)
        m = [np.zeros_like(w), np.zeros_like(b)]; v = [np.zeros_like(w), np.zeros_like(b)]
        onehot = np.eye(k)[y]
        for t in range(1, steps + 1):
            s = x @ w + b
            p = np.exp(s - s.max(axis=1, keepdims=True)); p /= p.sum(axis=1, keepdims=True)
            g_s = (p - onehot) / len(x)
            grads = [x.T @ g_s + l2 * w, g_s.sum(axis=0)]
            for i, (param, g) in enumerate(zip([w, b], grads)):
                m[i] = 0.9 * m[i] + 0.1 * g; v[i] = 0.999 * v[i] + 0.001 * g * g
                param -= lr * (m[i] / (1 - 0.9 ** t)) / (np.sqrt(v[i] / (1 - 0.999 ** t)) + 1e-8)
        eye = np.eye(d)
        return [np.hstack([eye, -eye]), np.zeros(2 * d), np.vstack([w, -w]), b]

    def predict(params, x):
        w1, b1, w2, b2 = params
        return (np.maximum(x @ w1 + b1, 0) @ w2 + b2).argmax(axis=1)

    def train_constant(action):
        """A policy that always proposes one action, as the same graph (one zero hidden unit)."""
        def fit(x, y):
            b2 = np.zeros(len(ACTIONS))
            b2[action(y)] = 1.0
            return [np.zeros((x.shape[1], 1)), np.zeros(1), np.zeros((1, len(ACTIONS))), b2]
        return fit

    # Candidates, simplest first: a tie goes to the simpler one.
    classes = {
        "always 700/10/10 (the guard alone moves)": train_constant(lambda y: 0),
        "majority label (a constant)": train_constant(lambda y: np.bincount(y, minlength=len(ACTIONS)).argmax()),
        "linear (softmax regression)": train_linear,
        "MLP (dense 32 ReLU)": train_mlp,
    }

    # Held-out workloads: train on every profile but one, test on the one left out. The regret is
    # the cost of the action chosen on the held-out profile's windows above its best action.
    profiles = sorted(runs)
    held_out = {name: {} for name in classes}
    for held in profiles:
        xt, yt, _ = dataset(lambda p: p != held)
        xv, yv, mv = dataset(lambda p: p == held)
        for name, fit in classes.items():
            pred = predict(fit(prep(xt), yt), prep(xv))
            held_out[name][held] = (float((pred == yv).mean()),
                                    float(np.mean([costs[p][a] - costs[p][best[p]] for p, a in zip(mv, pred)])))
    mean_regret = {name: float(np.mean([r for _, r in per.values()])) for name, per in held_out.items()}
    # Ship the class with the least held-out regret (the simpler one on a tie).
    chosen = min(classes, key=lambda name: (round(mean_regret[name], 6), list(classes).index(name)))

    params = classes[chosen](prep(x_all), y_all)
    train_acc = float((predict(params, prep(x_all)) == y_all).mean())
    w1, b1, w2, b2 = params
    model = onnx_model.build(w1, b1, w2, b2, mean, std, HISTORY, n_features, ACTIONS, schema,
                             {"neurogc.trained_on": ",".join(sorted(runs)), "neurogc.seed": str(SEED),
                              "neurogc.class": chosen})
    onnx.save(model, out_path)

    lines = [
        "# neurogc default model card",
        "",
        "Generated by `cargo xtask train` (training/train.py); do not edit by hand.",
        "",
        "## Contract",
        f"- input `features`: float32 [1, {HISTORY}, {n_features}], feature schema {schema}, the last {HISTORY} windows oldest first:",
        "  " + ", ".join(f"`{n}`" for n in names),
        f"- output `scores`: float32 [1, {len(ACTIONS)}], one per action; the agent takes the highest",
        "- actions (threshold0, threshold1, threshold2): " + ", ".join(f"{a}" for a in ACTIONS),
        f"- graph: asinh → standardise (training mean/std) → dense → ReLU → dense; class: {chosen}",
        "",
        "## Training data",
        "Recorded on the interpreter the recording ran (see below) with `neurogc-agent record --mode observe`,",
        "tests/workloads/profiles.py run under every action, 1 s windows, first window dropped:",
        "",
        "| profile | runs | best action | cost per action (" + ", ".join(str(a[0]) for a in ACTIONS) + ") |",
        "|---|---|---|---|",
    ]
    for profile in sorted(runs):
        c = ", ".join(f"{costs[profile].get(a, float('nan')):.3f}" for a in range(len(ACTIONS)))
        lines.append(f"| {profile} | {len(runs[profile])} | {ACTIONS[best[profile]]} | {c} |")
    lines += [
        "",
        f"Cost = {W_GC} × GC share of wall time + {W_P99_MS} × p99 pause (ms) + {W_RSS} × RSS growth over the",
        "700/10/10 run of the same profile. Lower is better.",
        "",
        "## Held-out workloads (offline)",
        "Each profile in turn is left out: trained on the others, tested on its windows. Regret = the",
        "cost of the chosen action above the held-out profile's best (lower is better).",
        "",
        "| class | " + " | ".join(f"{p} acc / regret" for p in profiles) + " | mean regret |",
        "|---|" + "---|" * (len(profiles) + 1),
    ]
    for name, per in held_out.items():
        cells = " | ".join(f"{per[p][0]:.2f} / {per[p][1]:.3f}" for p in profiles)
        mark = " (shipped)" if name == chosen else ""
        lines.append(f"| {name}{mark} | {cells} | {mean_regret[name]:.4f} |")
    lines += [
        "",
        f"Shipped: {chosen}, the class with the least mean held-out regret, trained on all",
        f"{len(x_all)} windows (training accuracy {train_acc:.3f}).",
        "",
        "## Closed loop on held-out workloads",
        *closed_loop(out_path),
        "",
        "## Traces",
        "Regenerated by `cargo xtask train` (not archived in the repository); SHA-256 of the ones this",
        "model was trained on, in target/training-traces/:",
        "",
    ]
    lines += [f"- `{h}` {n}" for n, h in digests]
    lines += [
        "",
        "## Limits",
        "- Four synthetic profiles on one interpreter build and one 2-core VM: the model knows these",
        "  shapes of GC load, nothing else. Its decisions pass through the agent's guardrails.",
        "- Labels are per profile (the best fixed thresholds), not per moment: it cannot learn phases.",
        "- Timing noise of the recording machine enters the costs; the training itself is seeded. A short",
        "  recording's p99 pause depends on whether a full collection fell inside it, so a profile's best",
        "  action can differ between two recordings of it: longer recordings would steady the labels.",
    ]
    open(card_path, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
