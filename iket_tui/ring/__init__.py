"""The kernel event ring: its binary layout, the CUDA runtime that writes it, a CPU producer
that writes the same bytes for tests, and the drain and decoder that read it back.

Nothing here imports Textual, TileLang or CuPy at import time: the UI decodes batches with
:mod:`iket_tui.ring.decode`, the agent owns the ring and runs :class:`~iket_tui.ring.drain.RingDrain`.
"""
