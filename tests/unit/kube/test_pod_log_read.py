"""A Job's log is read whole, up to its bound, however the answer arrives in chunks."""

from __future__ import annotations

import asyncio

from ichor.kube.batch import read_up_to


class Chunks:
    """A stream that hands out what has arrived, one chunk per read, as aiohttp's does."""

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = list(chunks)

    async def read(self, n: int) -> bytes:
        if not self.chunks:
            return b""
        chunk = self.chunks.pop(0)
        if len(chunk) > n:
            self.chunks.insert(0, chunk[n:])
            chunk = chunk[:n]
        return chunk


def test_a_log_in_three_chunks_is_read_whole() -> None:
    # the read Job's extensions log: the third node's documents came in a later chunk, and
    # one read of the stream took only the first, so that node was read as having none
    parts = (b'{"node": "10.0.0.1"}\n', b'{"node": "10.0.0.2"}\n', b'{"node": "10.0.0.3"}\n')
    assert asyncio.run(read_up_to(Chunks(*parts), 1024)) == b"".join(parts)


def test_the_bound_holds_across_chunks() -> None:
    assert asyncio.run(read_up_to(Chunks(b"abcd", b"efgh", b"ijkl"), 6)) == b"abcdef"


def test_an_empty_log_is_empty() -> None:
    assert asyncio.run(read_up_to(Chunks(), 10)) == b""
