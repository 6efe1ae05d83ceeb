"""Numbers the controllers read from their environment (the chart's Deployment sets them).

One reading for every setting: unset or empty means the default. It refuses to guess at
a value that is not a number: ``float`` raises and the operator does not start.
"""

from __future__ import annotations

import os
from typing import overload


@overload
def env_float(name: str, default: float) -> float: ...


@overload
def env_float(name: str, default: None = None) -> float | None: ...


def env_float(name: str, default: float | None = None) -> float | None:
    """``$name`` as a float, or ``default`` when it is unset or empty."""
    value = os.environ.get(name)
    return float(value) if value else default
