"""The learned model's inputs, one row per candidate action: their names and order are
`FEATURES` in neurogc-agent/src/steering/policy/predict/inputs.rs, read from there (one source, so training and
the agent cannot disagree). The agent computes them; the checks in `replay --json` decisions
carry them for training."""
import os
import re

SOURCE = os.path.join(os.path.dirname(__file__), "..", "neurogc-agent", "src", "steering", "policy", "predict", "inputs.rs")


def _read():
    text = open(SOURCE).read()
    body = re.search(r"pub const FEATURES: \[&str; (\d+)\] = \[(.*?)\];", text, re.S)
    if not body:
        raise SystemExit(f"{SOURCE}: no FEATURES array")
    names = re.findall(r'"(\w+)"', body.group(2))
    if len(names) != int(body.group(1)):
        raise SystemExit(f"{SOURCE}: FEATURES declares {body.group(1)} names, holds {len(names)}")
    return names


FEATURES = _read()
