"""A module of the package whose import never ends: it waits on an event nobody sets."""

from __future__ import annotations

import threading

threading.Event().wait()  # importing this module never returns
