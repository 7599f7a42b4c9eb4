"""Moved to llmbench/_xp.py (the ground floor, shared with footprint); kept so that code written
against the old path still imports. Remove once no branch imports it."""
from llmbench._xp import Scalar, backend_for, is_scalar  # noqa: F401
