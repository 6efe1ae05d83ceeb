"""The C allocator's mmap threshold: fixed on glibc, left alone when the environment sets it."""

from __future__ import annotations

import ctypes
import platform

import pytest

from ichor.kube import allocator
from ichor.settings import Settings


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
def test_threshold_is_fixed_on_glibc() -> None:
    assert allocator.keep_large_buffers_mapped(environment_sets=False) is True


def test_a_threshold_the_environment_sets_is_left(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[object] = []
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: called.append(a))
    assert allocator.keep_large_buffers_mapped(environment_sets=True) is False
    assert called == []  # mallopt was not even looked up


def test_nothing_is_done_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "libc_ver", lambda: ("", ""))
    assert allocator.keep_large_buffers_mapped(environment_sets=False) is False


def test_the_settings_say_whether_the_environment_sets_it() -> None:
    assert Settings.from_env({}).malloc_mmap_threshold is None
    given = Settings.from_env({"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert given.malloc_mmap_threshold == "65536"
