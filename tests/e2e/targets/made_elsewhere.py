"""A pass factory in a module the program imports: the pass it makes sleeps for as long as the
factory was told. Importing this module only defines it."""

from __future__ import annotations

import time
from typing import Any

from tilelang import tvm


def sleeper(seconds: float) -> Any:
    """``made.Elsewhere``, a pass that sleeps ``seconds`` before it returns the module."""

    @tvm.transform.module_pass(opt_level=0, name="made.Elsewhere")
    def sleep_elsewhere(mod: Any, ctx: Any) -> Any:
        time.sleep(seconds)  # the imported factory's pass sleeps as told
        return mod

    return sleep_elsewhere
