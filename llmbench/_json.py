"""Standard JSON out of Python values: NaN and infinities are not JSON (RFC 8259), so every JSON
writer of llmbench (the CLI's --json, `results export --format json`) passes its value through
`strict` first and dumps with allow_nan=False."""
from __future__ import annotations

import math


def strict(obj):
    """A copy where NaN and infinities are None: JSON output is standard JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return strict(obj.to_dict())
    return obj
