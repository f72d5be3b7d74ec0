"""A memory output for the learned model, judged before it is built: whether anything learned
predicts the RSS a change of setting leads to better than the agent's analytic model does.

The analytic model predicts what an action keeps over the application's own settings across the
next minute (deferred and frozen garbage). A change every second (the short recordings) shows
RSS over a second or two: nothing to check a minute's figure against. The long-hold recordings
(`cargo xtask train --held`: actions held about 12 s) show it over a good part of the minute.

The label of a change: the highest RSS over the windows it stays in force, less the RSS of the
window before it, less the change the analytic model predicted (its figure for the new action less
that for the one before), as a share of that RSS: a heap's size sets how much a setting can keep.
An agent could only add memory with it (a budget is a promise: a correction may make a setting
look costlier, never cheaper), so a class is judged by the error of the correction as it would
be applied, max(0, output). The card gives the table; the contract grows a memory output only
once a class beats the analytic model alone here.
"""
import glob
import os

import numpy as np

import records
from features import FEATURES
from linear import STATE_CANCELS, ridge, standardisation
from tables import class_table

# The agent's horizon (predict::HORIZON_S) in 0.5 s windows: no hold is read further.
HORIZON_WINDOWS = 120


def load(path):
    """A long-hold recording's changes: features of the new action and of the one before [n, F],
    the labels [n] (see the module), and per change the RSS measured and predicted to move (MiB).
    A change is read where its first window has a check (the analytic model was ready, and the
    window not idle); its hold lasts until the setting read from the target next differs."""
    windows = []  # (thresholds and whether frozen, RSS in MiB, the check of that window)
    for d in records.records(path):
        if d.get("type") == "window":
            sample = d["sample"]
            windows.append([(tuple(sample.get("thresholds") or ()), sample.get("frozen")),
                            sample["rss_bytes"] / 1048576.0, None])
        elif d.get("type") == "decision" and windows:
            windows[-1][2] = d.get("check")
    xs, fs, ys, moved = [], [], [], []
    for i, (setting, _, c) in enumerate(windows):
        memory = (c or {}).get("memory")
        if i == 0 or not memory or not c.get("from") or memory.get("from_mib") is None:
            continue
        end = i + 1
        while end < min(len(windows), i + HORIZON_WINDOWS) and windows[end][0] == setting:
            end += 1
        before = windows[i - 1][1]
        measured = max(w[1] for w in windows[i:end]) - before
        predicted = memory["predicted_mib"] - memory["from_mib"]
        xs.append(c["features"])
        fs.append(c["from"])
        ys.append((measured - predicted) / max(before, 1.0))
        moved.append((measured, predicted))
    shape = (-1, len(FEATURES))
    return (np.array(xs, np.float64).reshape(shape), np.array(fs, np.float64).reshape(shape),
            np.array(ys, np.float64), np.array(moved, np.float64).reshape(-1, 2))


# Candidates, simplest first (a tie goes to the simpler one); each maps the standardised
# difference of the two rows to weights.
CLASSES = {
    "none (the analytic model alone)": None,
    "linear, state cancels": STATE_CANCELS,
    "linear (ridge)": np.ones(len(FEATURES)),
}


def applied_error(w, d, y):
    """Mean |label - max(0, correction)| in shares of RSS (what the agent applies); 0 weights: none."""
    return float(np.mean(np.abs(y - np.maximum(0.0, d @ w))))


def validate(traces, tie_band):
    """The card's lines, and whether a class that learns won: each class's applied error with
    each family held out in turn (trained on the others' long-hold changes, standardised by
    their statistics), and the class chosen (the simplest within the band of the least mean).
    None under two families with changes."""
    data = {}
    for path in sorted(glob.glob(os.path.join(traces, "held", "*.checks.jsonl"))):
        family = os.path.basename(path).split("__")[0]
        x, f, y, moved = load(path)
        got = data.setdefault(family, [[], [], [], []])
        for k, v in enumerate((x, f, y, moved)):
            got[k].append(v)
    if not data:
        return None
    data = {fam: [np.concatenate(v) for v in got] for fam, got in data.items()}
    # A family whose changes all fell in windows that checked nothing (the acyclic service at
    # large thresholds: no collection in half a second) has none to hold out.
    families = sorted(fam for fam in data if len(data[fam][2]))
    if len(families) < 2:
        return None
    held = {name: {} for name in CLASSES}
    for fam in families:
        xt, ft, yt = (np.concatenate([data[g][k] for g in families if g != fam]) for k in range(3))
        # Standardised by the training folds' spread alone (the means cancel in the difference).
        s = standardisation(xt, ft)[1]
        xv, fv, yv = data[fam][:3]
        for name, keep in CLASSES.items():
            w = np.zeros(len(FEATURES)) if keep is None else ridge((xt - ft) / s * keep, yt) * keep
            held[name][fam] = applied_error(w, (xv - fv) / s, yv)
    score = {name: float(np.mean(list(v.values()))) for name, v in held.items()}
    best = min(score.values())
    chosen = next(name for name in CLASSES if score[name] <= best * (1 + tie_band))
    x, f, y, moved = (np.concatenate([data[g][k] for g in families]) for k in range(4))
    under = moved[:, 0] > moved[:, 1]
    lines = [
        "### Memory",
        "A setting's RSS, validated on the long-hold recordings alone (workloads/training/generator.py",
        "`--hold 12`, one per family and interpreter, 90 s): the highest RSS over the windows a",
        "change stays in force, less the RSS before it, against the analytic model's predicted",
        "change in what the setting keeps. A learned correction could only add memory (a budget is",
        "a promise), so the error is that of the correction as it would be applied, max(0, output),",
        "in shares of RSS:",
        "",
        "| family | changes | freezes or unfreezes | measured MiB, median / max | predicted MiB, median / max | under-predicted |",
        "|---|---|---|---|---|---|",
    ]
    freeze = FEATURES.index("freeze_change")
    for fam in families + ["all"]:
        xs, fs, _, mv = (x, f, y, moved) if fam == "all" else data[fam]
        lines.append(f"| {fam} | {len(mv)} | {int((xs[:, freeze] != fs[:, freeze]).sum())} | "
                     f"{np.median(mv[:, 0]):+.1f} / {mv[:, 0].max():+.1f} | {np.median(mv[:, 1]):+.1f} / "
                     f"{mv[:, 1].max():+.1f} | {int((mv[:, 0] > mv[:, 1]).sum())} |")
    lines += [
        "",
        "Each family held out in turn (error in shares of RSS; the simplest class within "
        f"{tie_band:.0%} of the least mean is chosen):",
        "",
    ]
    lines += class_table(CLASSES, families, lambda name, g: held[name][g], score.get, "mean", chosen, "chosen", 4)
    lines += [
        "",
        f"The analytic model under-predicted {int(under.sum())} of {len(y)} changes (RSS moved up more, or",
        f"down less, than it predicted), by a median {np.median(y[under]) * 100 if under.any() else 0.0:.1f}% of RSS. "
        + ("No class that learns beats it alone by more than the band: the model has no memory output,"
           " and what a setting keeps is the analytic model's."
           if CLASSES[chosen] is None else
           f"{chosen} beats it: shipping it needs a memory output in the contract (corrector/1 has"
           " none)."),
    ]
    return {"lines": lines, "learned": CLASSES[chosen] is not None}
