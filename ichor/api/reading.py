"""The lenient reads of a stored object's part as its model, written once.

What the API server stores was written by this Ichor, an older one, or a person with a
status grant; a part that does not load costs that part only, never the reconcile. A
setting (``read_whole``) is taken whole or not at all; a record (``read_model``) keeps
the fields that load; a count such as a generation is a whole number or absent
(``whole_number``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


def read_whole(model: type[M], raw: object) -> M | None:
    """``raw`` as ``model``, or None when it is absent, not an object, or does not load:
    a setting read in part would apply what nobody wrote."""
    if not isinstance(raw, Mapping):
        return None
    try:
        return model.model_validate(raw)
    except ValidationError:
        return None


def read_model(model: type[M], raw: object) -> M | None:
    """``raw`` as ``model``; when the whole does not load, the fields that do (a bad field
    costs that field only). None when ``raw`` is absent, not an object, or lacks a
    required field."""
    whole = read_whole(model, raw)
    if whole is not None or not isinstance(raw, Mapping):
        return whole
    good: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            model.model_validate({key: value})
        except ValidationError:
            continue
        good[key] = value
    try:
        return model.model_validate(good)
    except ValidationError:
        return None


def whole_number(value: object) -> int | None:
    """``value`` when it is an integer (a JSON ``true`` is not), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None
