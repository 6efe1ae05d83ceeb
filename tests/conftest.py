"""Fixtures live in tests/fixtures; component fixtures start real processes lazily,
so the pure unit tests (``make unit``) never touch them."""

pytest_plugins = [
    "tests.fixtures.apiserver",
    "tests.fixtures.fuzzing",
    "tests.fixtures.operator",
    "tests.fixtures.registry",
]
