"""What the models say and why: metrics, explanations, word-order probes, positional ablation and
the label audit (out-of-fold probabilities, confident learning)."""
