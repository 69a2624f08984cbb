"""iket-tui: a terminal monitor for TileLang/TVM compiler passes and IKET kernel events."""

__version__ = "0.1.0"
