"""The process's C allocator: large buffers given back when freed, not kept in its heap.

Every TLS connection, the clients' to workload clusters and the webhook's from the API
server alike, holds asyncio's 256 KiB read buffer (``asyncio.sslproto.SSLProtocol``) for
as long as it is open, and the operator opens one per workload cluster per observation.
glibc serves an allocation of 128 KiB or more with a mapping of its own, given back on
free, but once such a mapping is freed it raises that threshold above the size freed
(its "dynamic mmap threshold"), so every later 256 KiB buffer is cut from the heap, small
long-lived objects settle between them, and the heap cannot shrink past them: at 1,000
clusters malloc held 139 MiB of which 73 MiB was free, and the operator's RSS was 264 to
321 MiB under the chart's 256 MiB limit. Setting the threshold (mallopt(3),
``M_MMAP_THRESHOLD``) to glibc's own starting value stops it moving: each buffer is a
mapping again, gone from the RSS when its connection closes (the same run: 206 MiB, 7
MiB free in malloc). Costs two system calls per connection, next to its TLS handshake.

A threshold the environment sets (``MALLOC_MMAP_THRESHOLD_``, which glibc reads itself and
the settings report as ``Settings.malloc_mmap_threshold``) is left as it is; on a C library
other than glibc nothing is done.
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
