"""Write tests/gotools/compat.json: the compatibility table for the Go programs.

`make compat-json` runs this after a change to ichor/release/compat.py or
ichor/release/machinery_rows.py; the unit test tests/unit/compat/test_export.py fails
until it is run (see tests/support/compat_export.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.compat_export import EXPORT, render  # noqa: E402

if __name__ == "__main__":
    text = render()
    changed = not EXPORT.exists() or EXPORT.read_text() != text
    EXPORT.write_text(text)
    print(f"{EXPORT.relative_to(ROOT)}: {'written' if changed else 'unchanged'}")
