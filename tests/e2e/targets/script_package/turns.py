"""Where the package's loop starts."""

FIRST_TURN = 0
