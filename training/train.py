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
"""
import glob
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


def history(feats, i):
    """The last HISTORY windows up to i, the oldest repeated at the start (as the agent does)."""
    return np.array([feats[max(j, 0)] for j in range(i - HISTORY + 1, i + 1)])


def main():
    traces, out_path, card_path = sys.argv[1:4]
    runs = {}
    schema = names = None
    for path in sorted(glob.glob(os.path.join(traces, "*.ngc"))):
        profile, action, repeat = os.path.basename(path)[:-4].split("__")
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
            {"action": ACTIONS.index(action), "repeat": int(repeat), "features": f,
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

    def dataset(select):
        xs, ys, meta = [], [], []
        for profile, rs in runs.items():
            for r in rs:
                if not select(r):
                    continue
                for i in range(len(r["features"])):
                    xs.append(history(r["features"], i))
                    ys.append(best[profile])
                    meta.append(profile)
        return np.array(xs, np.float64), np.array(ys), meta

    rng = np.random.default_rng(SEED)
    x_all, y_all, _ = dataset(lambda r: True)
    scaled = np.arcsinh(x_all)
    mean = scaled.reshape(-1, n_features).mean(axis=0)
    std = scaled.reshape(-1, n_features).std(axis=0) + 1e-3

    def prep(x):
        return ((np.arcsinh(x) - mean) / std).reshape(len(x), -1)

    def train(x, y, steps=3000, lr=0.01, l2=1e-3):
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

    def predict(params, x):
        w1, b1, w2, b2 = params
        return (np.maximum(x @ w1 + b1, 0) @ w2 + b2).argmax(axis=1)

    # Offline metrics: train on one repeat, evaluate on the other (and the other way round).
    repeats = sorted({r["repeat"] for rs in runs.values() for r in rs})
    acc, regret, default_regret = [], [], []
    for held in repeats:
        xt, yt, _ = dataset(lambda r: r["repeat"] != held)
        xv, yv, mv = dataset(lambda r: r["repeat"] == held)
        if len(xt) == 0 or len(xv) == 0:
            continue
        pred = predict(train(prep(xt), yt), prep(xv))
        acc.append(float((pred == yv).mean()))
        regret.append(float(np.mean([costs[p][a] - costs[p][best[p]] for p, a in zip(mv, pred)])))
        default_regret.append(float(np.mean([costs[p][0] - costs[p][best[p]] for p in mv])))

    params = train(prep(x_all), y_all)
    train_acc = float((predict(params, prep(x_all)) == y_all).mean())
    w1, b1, w2, b2 = params
    model = onnx_model.build(w1, b1, w2, b2, mean, std, HISTORY, n_features, ACTIONS, schema,
                             {"neurogc.trained_on": ",".join(sorted(runs)), "neurogc.seed": str(SEED)})
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
        "- graph: asinh → standardise (training mean/std) → dense 32 ReLU → dense (numpy-trained MLP)",
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
        "## Offline metrics",
        f"- windows: {len(x_all)}; training accuracy {train_acc:.3f}",
        f"- held-out repeat (train on one repeat, test on the other): accuracy {np.mean(acc):.3f},",
        f"  mean regret {np.mean(regret):.4f} (cost above the best action) vs {np.mean(default_regret):.4f} for always 700/10/10",
        "",
        "## Limits",
        "- Four synthetic profiles on one interpreter build and one 2-core VM: the model knows these",
        "  shapes of GC load, nothing else. Its decisions pass through the agent's guardrails.",
        "- Labels are per profile (the best fixed thresholds), not per moment: it cannot learn phases.",
        "- Timing noise of the recording machine enters the costs; the training itself is seeded.",
    ]
    open(card_path, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
