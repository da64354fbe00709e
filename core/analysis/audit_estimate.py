"""How many of the rows a label audit flags are expected to be real label errors: the audit's own
estimate, from its out-of-fold probabilities and cleanlab's estimate of the noise rates (the
confident joint). No known error is needed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from cleanlab.count import compute_confident_joint, estimate_latent


@dataclass(frozen=True)
class ErrorEstimate:
    """The expected number of real label errors among the flagged rows, with its two bounds.

    `high` takes each row's out-of-fold probability of its given label at its word; rows are
    flagged because that probability is low, so it over-counts where the model is confidently
    wrong (ambiguous texts, word-order twins). `low` also weighs in how rarely cleanlab's
    estimated noise rates say a label is wrong at all, which under-counts. On planted flips
    the true count lay between the two (BENCHMARKS.md, "Label audit"); `expected` is their middle.
    """

    flagged: int
    expected: float
    low: float
    high: float

    @property
    def share(self) -> float:
        """The expected share of real errors among the flagged rows (0 when none are flagged)."""
        return self.expected / self.flagged if self.flagged else 0.0

    def sentence(self) -> str:
        """One sentence for the auditor."""
        if self.flagged == 0:
            return "The model flags no row: it finds no label it confidently doubts."
        return (
            f"Of the {self.flagged:,} rows the model flags, the audit expects about "
            f"{self.expected:,.0f} ({self.share:.0%}) to be real label errors (between "
            f"{self.low:,.0f} and {self.high:,.0f}); the rest are rows it finds ambiguous. "
            "The most likely errors come first."
        )

    def to_json(self) -> dict[str, float | int]:
        """A JSON-ready dict of the four numbers."""
        return {
            "flagged": self.flagged,
            "expected": self.expected,
            "low": self.low,
            "high": self.high,
        }


def error_probabilities(label_ids: np.ndarray, pred_probs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Two estimates per row of the probability that its given label is wrong, (n_rows,) each.

    The first, 1 - p(given), reads the out-of-fold probabilities as they are. The second is
    the posterior of the given label under cleanlab's noise matrix P(given | true):
    P(true = j | x, given s) is proportional to P(s | j) p_j(x).

    Parameters
    ----------
    label_ids : (n_rows,) given label ids, every class with at least two rows
    pred_probs : (n_rows, n_classes) out-of-fold probabilities, rows summing to 1
    """
    rows = np.arange(len(label_ids))
    plain = 1.0 - pred_probs[rows, label_ids]
    confident_joint = compute_confident_joint(label_ids, pred_probs)
    _, noise_matrix, _ = estimate_latent(confident_joint, label_ids)
    weighted = noise_matrix[label_ids, :] * pred_probs  # (n_rows, n_classes): P(s | j) p_j(x)
    total = np.clip(weighted.sum(axis=1), 1e-12, None)
    noisy = 1.0 - weighted[rows, label_ids] / total
    return plain, noisy


def estimate_errors(
    label_ids: np.ndarray, pred_probs: np.ndarray, flagged: np.ndarray
) -> ErrorEstimate:
    """The expected number of real label errors among the `flagged` row positions."""
    plain, noisy = error_probabilities(label_ids, pred_probs)
    high, low = float(plain[flagged].sum()), float(noisy[flagged].sum())
    return ErrorEstimate(flagged=len(flagged), expected=(low + high) / 2, low=low, high=high)
