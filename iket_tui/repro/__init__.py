"""A self-contained reproducer for a failed compile in a recording (``iket-tui repro``).

The agent captured what the failure needs (``compile_failure``), and the reproducer makes the
same error come back in a fresh process, without the original program:

- a failed pass: the module it was given (TVM JSON), the target and the pass-context
  configuration. The reproducer loads that module and runs that one pass on it. Passes that are
  not TileLang's or TVM's own (defined in the user's code) cannot be rebuilt from their name:
  the reproducer says so, and the module is still written.
- a failed codegen step: the CUDA source nvcc rejected and nvcc's arguments. The reproducer
  runs nvcc on that source through TileLang's ``compile_cuda``, with the installed TileLang's
  include directories in place of those of the install that recorded it.
- a hang: a pass that was still running when the agent captured it (a ``stuck`` answer, from a
  live target or a recording), or one aborted from outside (a ``compile_failure`` with
  ``CompileAborted``). The reproducer runs that pass alone on the module it was given, in a
  thread, and after a timeout says whether it still runs (exit code :data:`HANG_EXIT`) with the
  pass's Python stack, or that it returned. A pass of the user's own is rebuilt from the file
  its code was seen in, which the reproducer then needs: a module of a package is imported by its
  dotted name, and of the program's main script only the pass's definition and the script's
  imports are run, never the program. A pass made by a factory (a function, a method, a class
  decorated with ``module_pass``) is made by calling that factory again with the arguments the
  agent saw (see :mod:`iket_tui.agent.pass_maker`); those it could not see are given with
  ``--arg NAME=EXPR``.
"""

from iket_tui.repro.captured import DEFAULT_OPT_LEVEL, MAIN, TVM, Repro, ReproError, compiler_of, write_directory
from iket_tui.repro.failures import CODEGEN, first_diagnostic, write
from iket_tui.repro.hang_script import package_of, pass_definitions
from iket_tui.repro.hangs import HANG_EXIT, MIN_HANG_TIMEOUT_S, hang_timeout, stuck_in, write_hang

__all__ = [
    "CODEGEN",
    "DEFAULT_OPT_LEVEL",
    "HANG_EXIT",
    "MAIN",
    "MIN_HANG_TIMEOUT_S",
    "TVM",
    "Repro",
    "ReproError",
    "compiler_of",
    "first_diagnostic",
    "hang_timeout",
    "package_of",
    "pass_definitions",
    "stuck_in",
    "write",
    "write_directory",
    "write_hang",
]
