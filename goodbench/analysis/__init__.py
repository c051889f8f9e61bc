"""Composing runs: statistics with confidence, sweeps."""
