"""The process's C allocator: large buffers given back when freed, not kept in its heap.

Every TLS connection holds asyncio's 256 KiB read buffer; glibc's moving mmap threshold
would cut later ones from the heap, which then cannot shrink. Setting the threshold
(``M_MMAP_THRESHOLD``) to glibc's starting value keeps each buffer a mapping of its own,
returned when its connection closes. A threshold the environment sets is left as it is;
on a C library other than glibc nothing is done.

More in docs/design/notes.md, "ichor/kube/allocator.py".
"""

from __future__ import annotations

import ctypes
import logging
import platform

logger = logging.getLogger(__name__)

#: mallopt(3)'s parameter number of the mmap threshold (malloc.h).
M_MMAP_THRESHOLD = -3
#: glibc's starting threshold: allocations of this size or more get a mapping each.
MMAP_THRESHOLD = 128 * 1024


def keep_large_buffers_mapped(*, environment_sets: bool) -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD`` for this process; True when set
    (False: not glibc, or ``environment_sets`` it)."""
    if environment_sets or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) != 1:
        logger.warning("malloc's mmap threshold not set: freed TLS buffers stay in the RSS")
        return False
    return True
