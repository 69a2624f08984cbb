# iket-tui tasks. `just check` is what every commit keeps green.

venv := ".venv"
py := venv / "bin/python"

default: check

# Create .venv with the TileLang extra (torch's CPU build first, see README).
setup:
    test -x {{py}} || python3 -m venv {{venv}}
    {{py}} -c "import torch" 2>/dev/null || {{venv}}/bin/pip install torch==2.13.0
    {{venv}}/bin/pip install -e '.[tilelang,dev]'

# Format check, lint, types, layering, tests.
check: lint test

lint:
    {{venv}}/bin/ruff format --check iket_tui tests benchmarks scripts
    {{venv}}/bin/ruff check iket_tui tests benchmarks scripts
    {{venv}}/bin/mypy
    {{venv}}/bin/lint-imports

fmt:
    {{venv}}/bin/ruff format iket_tui tests benchmarks scripts
    {{venv}}/bin/ruff check --fix iket_tui tests benchmarks scripts

test *ARGS:
    {{venv}}/bin/pytest {{ARGS}}

# Benchmarks; figures go to BENCHMARKS.md.
bench:
    {{py}} -m benchmarks.run

# The live demo on the bundled TileLang program.
demo:
    {{venv}}/bin/iket-tui demo

# Refresh the SVGs in screenshots/.
screenshots:
    {{py}} scripts/screenshots.py
