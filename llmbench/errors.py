"""The one error type for bad input, shared by every area (no imports).

Raise `BadInput("--seq must be a positive integer, got 0")` (or from a file: name the file and the
key) wherever user input is checked. It is a ValueError, so older `except ValueError` code keeps
working; the CLI prints it as one line, `error: <message>`, and exits with code 2.
"""


class BadInput(ValueError):
    """Bad input from the user (an option, a file, a database): one line that names it."""
