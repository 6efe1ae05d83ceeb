"""The C allocator's mmap threshold: fixed on glibc, left alone when the environment sets it."""

from __future__ import annotations

import platform

import pytest

from ichor.kube import allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_threshold_is_fixed_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(allocator.ENVIRONMENT, raising=False)
    assert allocator.keep_large_buffers_mapped() is True


def test_a_threshold_the_environment_sets_is_left(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(allocator.ENVIRONMENT, "65536")
    assert allocator.keep_large_buffers_mapped() is False


def test_nothing_is_done_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(allocator.ENVIRONMENT, raising=False)
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert allocator.keep_large_buffers_mapped() is False
