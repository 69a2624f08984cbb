"""``python -m iket_tui``: the iket-tui command line."""

from iket_tui.cli import main

raise SystemExit(main())
