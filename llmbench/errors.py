"""The one error type for bad input, shared by every area (no imports).

Raise `BadInput("--seq must be a positive integer, got 0")` (or from a file: name the file and the
key) wherever user input is checked. It is a ValueError, so older `except ValueError` code keeps
working; the CLI prints it as one line, `error: <message>`, and exits with code 2.
"""


class BadInput(ValueError):
    """Bad input from the user (an option, a file, a database): one line that names it."""


#: characters of a hardware, profile or study name: it becomes a file name, so no path separator,
#: no control character, no leading dot
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")
MAX_NAME_LEN = 100


def check_name(name, what: str = "name") -> str:
    """`name` if it is a name (letters, digits, '-', '_', '.'; not starting with '.'; at most
    MAX_NAME_LEN); else BadInput saying so: '../evil' or 'a\\nb' never reach a path."""
    if (not isinstance(name, str) or not name or len(name) > MAX_NAME_LEN or name[0] == "."
            or not set(name) <= NAME_CHARS):
        raise BadInput(f"{what} must be letters, digits, '-', '_' or '.' (not first), at most "
                       f"{MAX_NAME_LEN} characters; got {name!r}")
    return name
