"""Benchmarks of iket-tui's speed targets; run them all with ``python -m benchmarks.run``."""
