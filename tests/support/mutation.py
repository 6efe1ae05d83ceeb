"""Run one test module in this process, the code under test changed, and name what fails.

A mutation test: with one step of a decision chain skipped (always passing), the tests of
that chain must fail, and one of them must name the step. ``failing_tests`` runs the
module with pytest in-process (the module is already imported, so the patch the caller
made on the code under test holds) and returns the node ids that failed.
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest


class _Failures:
    """A pytest plugin that keeps the node ids of the tests that failed."""

    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed = 0

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.append(report.nodeid)
        elif report.passed and report.when == "call":
            self.passed += 1


def failing_tests(module: Path, *, deselect: str = "") -> tuple[list[str], int]:
    """The node ids of the tests of ``module`` that fail as the code now is, and how
    many passed. ``deselect``: a ``-k`` expression of tests to leave out."""
    failures = _Failures()
    args = [str(module), "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    if deselect:
        args += ["-k", f"not ({deselect})"]
    with redirect_stdout(io.StringIO()):
        code = pytest.main(args, plugins=[failures])
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise RuntimeError(f"pytest could not run {module}: exit code {code}")
    return failures.failed, failures.passed
