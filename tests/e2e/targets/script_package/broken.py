"""A module of the package whose relative import names a module that is not there."""

from __future__ import annotations

from .missing import FIRST_TURN  # type: ignore[import-not-found]

__all__ = ["FIRST_TURN"]
