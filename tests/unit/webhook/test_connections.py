"""The TLS listener's caps: places, handshake turns and the grace of a stalled caller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ichor.webhook import connections


class FakeConnection:
    def __init__(self, name: str) -> None:
        self.name = name
        self.aborted = False

    def abort(self) -> None:
        self.aborted = True


async def test_a_new_connection_takes_the_place_of_the_oldest_handshake() -> None:
    """Connections that never finish their TLS handshake cannot keep the API server out:
    beyond the places, one stalled in its handshake past the grace gives way, else the
    oldest waiting for a turn; only connections past their handshake refuse a new one.
    A burst of quick handshakes beyond the turns waits for one instead of being dropped
    (the API server opens a new connection for most reviews of a burst)."""
    now = [0.0]
    gate = connections.Connections(limit=4, handshakes=2, grace=0.5, clock=lambda: now[0])
    made: dict[str, Any] = {n: FakeConnection(n) for n in "abcdefgh"}
    a, b, c, d, e, f, g, h = made.values()
    for early in (a, b, c, d):
        assert gate.admit(early)
    await gate.turn(a, within=1)
    await gate.turn(b, within=1)
    waiting_c = asyncio.create_task(gate.turn(c, within=5))
    waiting_d = asyncio.create_task(gate.turn(d, within=5))
    await asyncio.sleep(0)
    assert not waiting_c.done()  # two handshakes at most: c and d wait
    assert not waiting_d.done()
    assert not any(x.aborted for x in (a, b, c, d))  # nobody was dropped for a turn
    assert gate.admit(e)
    assert c.aborted  # four places, no handshake stalled yet: the oldest waiting gave way
    assert gate.dropped == 1
    with pytest.raises(asyncio.CancelledError):
        await waiting_c
    assert not gate.established(c)  # it lost its place
    now[0] = 1.0  # a and b have run their handshakes past the grace
    assert gate.established(b)  # b said hello after all: its turn goes to d, who waited
    await waiting_d
    assert gate.admit(f)
    assert a.aborted  # four places: the handshake stalled past the grace gave way
    assert gate.dropped == 2
    assert not gate.established(a)
    for later in (d, e, f):
        if later is not d:
            await gate.turn(later, within=1)
        assert gate.established(later)
    assert gate.open == 4
    assert not gate.admit(g)  # every place is past its handshake
    assert gate.refused == 1
    assert not g.aborted
    gate.release(b)
    assert gate.admit(g)
    assert gate.peak == 4
    assert not h.aborted


async def test_a_newcomer_takes_the_turn_of_a_handshake_stalled_past_the_grace() -> None:
    now = [0.0]
    gate = connections.Connections(limit=8, handshakes=2, grace=0.5, clock=lambda: now[0])
    idle = [_fake(f"idle-{i}") for i in range(2)]
    for connection in idle:
        assert gate.admit(connection)
        await gate.turn(connection, within=1)
    quick = _fake("quick")
    assert gate.admit(quick)
    waiting = asyncio.create_task(gate.turn(quick, within=5))
    await asyncio.sleep(0)
    assert not waiting.done()  # within the grace the idle ones keep their turns
    waiting.cancel()
    gate.release(quick)
    now[0] = 0.6
    api_server = _fake("api-server")
    assert gate.admit(api_server)
    await gate.turn(api_server, within=0.01)  # at once: the oldest stalled one gave way
    assert idle[0].aborted
    assert not idle[1].aborted
    # a turn not given within the bound is a TimeoutError (the connection is dropped)
    held = connections.Connections(limit=8, handshakes=1, grace=10, clock=lambda: 0.0)
    first, late = _fake("first"), _fake("late")
    for connection in (first, late):
        assert held.admit(connection)
    await held.turn(first, within=1)
    with pytest.raises(TimeoutError):
        await held.turn(late, within=0.05)
    assert held.established(first)


def _fake(name: str) -> Any:
    """A connection as ``Connections`` sees it: it can be aborted."""
    return FakeConnection(name)
