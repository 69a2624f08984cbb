"""The kernel event ring: its binary layout, the CUDA runtime that writes it
(``device_runtime.cuh``, put into generated code by :mod:`iket_tui.ring.device`), a CPU producer
that writes the same bytes for tests, and the drain and decoder that read it back.

Nothing here imports Textual, TileLang or CuPy at import time: the UI decodes batches with
:mod:`iket_tui.ring.decode`, the agent owns the ring and runs :class:`~iket_tui.ring.drain.RingDrain`,
and the batches and counters a drain hands on (:mod:`iket_tui.ring.counters`) are plain values.
"""
