"""The browser test fails, never skips, when a part it needs was not built."""

from __future__ import annotations

from pathlib import Path

from tests.component.ui.conftest import missing_parts


def test_a_missing_part_fails_the_browser_test_naming_make_ui(tmp_path: Path) -> None:
    """No browser, no packages, no build: each is named, and the fixture fails (never
    skips) with `make ui`."""
    missing = missing_parts(plugin=tmp_path, chromium=str(tmp_path / "no-chromium"))
    assert missing == [
        "ui/headlamp/node_modules/playwright-core",
        "ui/headlamp/node_modules/axe-core",
        "ui/headlamp/dist/main.js (the plugin)",
        "ui/headlamp/build/harness (the host page)",
        f"{tmp_path / 'no-chromium'} (Debian's chromium)",
    ]
