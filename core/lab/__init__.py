"""The Attention lab: a self-attention worked example with numbers that can be checked by hand."""
