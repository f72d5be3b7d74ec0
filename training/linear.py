"""What the corrector's training and the memory output's check share: inputs standardised over
both rows of every transition, and ridge regression on the difference of the two rows (the way
the agent applies a model: its output for the new action less that for the one before)."""
import numpy as np

from features import FEATURES

# 1 for every input but the move times the process's state (`*_x_*`): without those the state
# cancels in a linear model's difference (the class shipped before them), kept as a candidate
# to show what they earn.
STATE_CANCELS = np.array([0.0 if "_x_" in name else 1.0 for name in FEATURES])


def standardisation(x, f):
    """Mean and spread of the inputs, over both rows of every transition given."""
    both = np.vstack([x, f])
    return both.mean(0), both.std(0) + 1e-3


def ridge(d, y, l2=3.0):
    """Weights w minimising |d w - y|^2 + l2 |w|^2."""
    return np.linalg.solve(d.T @ d + l2 * np.eye(d.shape[1]), d.T @ y)
