"""JSON from outside the operator's trust, read within bounds, pure.

Two places read JSON another party wrote: the webhook reads the AdmissionReview a caller
posted (``ichor.webhook.intake``), and the controller reads what a workload cluster
answers, Helm release Secrets included (``ichor.controller.observe``, the TalosCluster
reconciler, and auto-patch's health checks). ``json.loads`` has no bound of its own: a few MiB of
``[{},{},...]`` become hundreds of MiB of Python objects, ``[[[[...`` exhausts the
recursion limit, and a gzip of 29 KiB inflates to 16 MiB. So the bytes are bounded
before they are inflated or read, the values are counted before they are parsed
(``values_in``: one per separator and opener, an upper bound), and the nesting is checked
after (``too_deep``, without recursion). Nothing here raises on bad input.
"""

from __future__ import annotations

import json
import zlib
from typing import Any

#: Memory one parsed JSON value may take, at most (measured: an object with many
#: distinct keys takes about 150 bytes a value while parsing).
VALUE_COST = 160
#: What ``gunzip`` inflates at a time.
GUNZIP_PIECE = 1024 * 1024


def values_in(payload: bytes) -> int:
    """An upper bound on the JSON values in ``payload``: one per separator and opener."""
    return payload.count(b",") + payload.count(b"[") + payload.count(b"{") + 1


def too_deep(data: object, max_depth: int) -> bool:
    """Whether ``data`` nests objects and lists deeper than ``max_depth`` (no recursion)."""
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > max_depth:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def gunzip(raw: bytes, *, limit: int) -> bytes | None:
    """gzip ``raw`` inflated to at most ``limit`` bytes, or None (larger, or not gzip).

    The output is bounded while inflating (``max_length``), a piece at a time, so no more
    than ``limit`` and one piece is ever held."""
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = bytearray()
    pending = raw
    try:
        while True:
            piece = inflate.decompress(pending, GUNZIP_PIECE)
            out += piece
            if len(out) > limit:
                return None
            pending = inflate.unconsumed_tail
            if not pending and len(piece) < GUNZIP_PIECE:
                break
        out += inflate.flush()
    except zlib.error:
        return None
    if len(out) > limit or not inflate.eof:
        return None
    return bytes(out)


def loads(
    payload: bytes, *, max_bytes: int, max_values: int, max_depth: int, what: str = "it"
) -> tuple[object, str | None]:
    """The JSON of ``payload``, or why it was not read, said of ``what``: over
    ``max_bytes``, more than ``max_values`` values (counted before parsing), not JSON, or
    nested deeper than ``max_depth`` (deep enough to exhaust Python's recursion is caught
    too)."""
    if len(payload) > max_bytes:
        return None, f"{what} has {len(payload):,} bytes, more than {max_bytes:,}"
    if values_in(payload) > max_values:
        return None, f"{what} holds more than {max_values:,} JSON values"
    try:
        data = json.loads(payload)
    except RecursionError:
        return None, f"{what} nests objects and lists deeper than {max_depth} levels"
    except (ValueError, UnicodeDecodeError):
        return None, f"{what} is not JSON"
    if too_deep(data, max_depth):
        return None, f"{what} nests objects and lists deeper than {max_depth} levels"
    return data, None
