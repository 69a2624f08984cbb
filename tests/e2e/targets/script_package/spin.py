"""``own_script.Spin`` as a module of a package, with a relative import."""

from __future__ import annotations

from typing import Any

from tilelang import tvm

from .turns import FIRST_TURN


@tvm.transform.module_pass(opt_level=0, name="own_script.Spin")
def spin_in_package(mod: Any, ctx: Any) -> Any:
    turns = FIRST_TURN
    while turns >= 0:  # the package's own loop that never ends
        turns += 1
    return mod
