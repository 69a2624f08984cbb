# iket-tui tasks. `just check` is what every commit keeps green.

venv := ".venv"
py := venv / "bin/python"
core_venv := ".venv-core"
tvm_venv := ".venv-tvm"

default: check

# Create .venv with the TileLang extra (torch's CPU build first, see README).
setup:
    test -x {{py}} || python3 -m venv {{venv}}
    {{py}} -c "import torch" 2>/dev/null || {{venv}}/bin/pip install torch==2.13.0
    {{venv}}/bin/pip install -e '.[tilelang,dev]'

# Format check, lint, types, layering, tests; then the tests without the optional extras.
# .ci/run runs the same steps on a clean checkout.
check: lint test slow core

lint:
    {{venv}}/bin/ruff format --check iket_tui tests benchmarks scripts
    {{venv}}/bin/ruff check iket_tui tests benchmarks scripts
    {{venv}}/bin/mypy
    {{venv}}/bin/lint-imports

fmt:
    {{venv}}/bin/ruff format iket_tui tests benchmarks scripts
    {{venv}}/bin/ruff check --fix iket_tui tests benchmarks scripts

test *ARGS:
    {{venv}}/bin/pytest -n auto {{ARGS}}

# The slowest end-to-end tests (marked slow in tests/conftest.py), which `just test` and the
# README's test command leave out; CI runs them after those.
slow *ARGS:
    {{venv}}/bin/pytest -n auto -m slow {{ARGS}}

# What differs without TileLang, and on another Python: every test file must import (collected
# whole), and the tests of the layers that run there (model, protocol, ring, sources, export, the
# UI) and of what says TileLang is missing run; the tests that need TileLang skip with the reason.
# The end-to-end tests of real programs, which need TileLang, run in the main lane only.
core_tests := "tests/model tests/protocol tests/ring tests/sources tests/export tests/packaging tests/durations tests/ui tests/cli/test_cli_demo.py tests/cli/test_cli_help.py tests/cli/test_cli_run.py tests/cli/test_cli_completion.py tests/cli/test_cli_outputs.py tests/cli/test_cli_stdout.py tests/agent/test_agent_lifecycle.py"

# The tests in a venv with the test extra only (no TileLang): every test file must import, and
# the tests that need TileLang skip with the reason (their snapshots unused: a warning, not a failure).
core *ARGS:
    test -x {{core_venv}}/bin/python || python3 -m venv {{core_venv}}
    {{core_venv}}/bin/pip install -q -e '.[test]'
    {{core_venv}}/bin/python -c "import importlib.util as u; assert not u.find_spec('tilelang'), 'TileLang is installed in {{core_venv}}'"
    {{core_venv}}/bin/pytest -p no:cacheprovider --collect-only -q > /dev/null
    {{core_venv}}/bin/pytest -p no:cacheprovider -n auto --snapshot-warn-unused {{ARGS}} {{core_tests}}

latest_python := "3.13"

# The core tests, as `just core`, on the highest Python the package claims (its last classifier).
core-latest *ARGS: (core-python latest_python ARGS)

# The core tests, as `just core`, on Python VERSION (one the package claims in a classifier), from
# Debian's packages or pyenv, in a venv of its own (.venv-core-VERSION); fails, saying so, where it
# cannot be had.
core-python VERSION *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    grep -qF '"Programming Language :: Python :: {{VERSION}}"' pyproject.toml || { echo "core-python: pyproject.toml claims no Python {{VERSION}}" >&2; exit 1; }
    venv=.venv-core-{{VERSION}}
    if [ ! -x $venv/bin/python ]; then
        python=""
        for candidate in "$(command -v python{{VERSION}} || true)" "$(pyenv root 2>/dev/null || echo ~/.pyenv)"/versions/{{VERSION}}*/bin/python{{VERSION}}; do
            # (a pyenv shim of a version pyenv has not selected fails this and is passed over)
            if [ -x "$candidate" ] && "$candidate" -c 'import sys; assert sys.version.startswith("{{VERSION}}.")' 2>/dev/null; then
                python=$candidate
                break
            fi
        done
        if [ -z "$python" ]; then
            echo "core-python: no Python {{VERSION}} here (neither python{{VERSION}} on PATH nor a pyenv version)" >&2
            exit 1
        fi
        "$python" -m venv $venv
    fi
    $venv/bin/pip install -q -e '.[test]'
    $venv/bin/python -c "import importlib.util as u, sys; assert not u.find_spec('tilelang'), 'TileLang is installed'; print('core tests on Python', sys.version.split()[0])"
    $venv/bin/pytest -p no:cacheprovider --collect-only -q > /dev/null
    $venv/bin/pytest -p no:cacheprovider -n auto --snapshot-warn-unused {{ARGS}} {{core_tests}}

# The plain Apache TVM tests (tests/tvm) in a venv of their own with the tvm extra: apache-tvm and
# TileLang cannot share one. They skip in the other venvs, where `tvm` is TileLang's or missing.
test-tvm *ARGS:
    test -x {{tvm_venv}}/bin/python || python3 -m venv {{tvm_venv}}
    {{tvm_venv}}/bin/pip install -q -e '.[tvm,test]'
    {{tvm_venv}}/bin/python -c "import importlib.util as u; assert not u.find_spec('tilelang'), 'TileLang is installed in {{tvm_venv}}'"
    {{tvm_venv}}/bin/pytest -p no:cacheprovider tests/tvm {{ARGS}}

# Benchmarks; figures go to BENCHMARKS.md.
bench:
    {{py}} -m benchmarks.run

# Fuzz decoders, reader, session, dump and exports for SECONDS; breaking inputs go to tests/fuzz/seeds/.
fuzz SECONDS="60":
    {{py}} tests/fuzz/run.py {{SECONDS}}

# The live demo on the bundled TileLang program.
demo:
    {{venv}}/bin/iket-tui demo

# Refresh the SVGs in screenshots/.
screenshots:
    {{py}} scripts/screenshots.py
