"""Whose ``ichor.dev/*`` labels and annotations are whose: the operator's marks, the
webhook's stamps, and the few a person sets.

The controllers read their own bookkeeping from labels and annotations (an operation the
operator started, a failure whose halt is recorded), so a mark a person could set, change
or remove would change what the operator decides. The prefix ``ichor.dev`` (and every
subdomain of it) is reserved: on each kind, a key is a person's only when it is listed
in ``USER_KEYS``; the webhook's own stamps (``ichor.api.records``) are judged by the
webhook's stamp check; every other such key is the operator's alone. The webhook
enforces it (``ichor.webhook.marks``); this module only lists.
"""

from __future__ import annotations

from collections.abc import Mapping

from ichor.api import kinds, records
from ichor.api.autopatch import HALTED_ANNOTATION, RESUME_ANNOTATION, UNHALT_ANNOTATION
from ichor.api.talosoperation import (
    ATTEMPT_ANNOTATION,
    STARTED_BY_LABEL,
    STARTED_FOR_ANNOTATION,
)

#: The reserved domain of label and annotation keys.
DOMAIN = "ichor.dev"

#: Keys a person sets on each kind: the request to resume a cluster's auto-patch, the
#: adoption marker of a create (``ichor adopt``), the request to lift a halt.
USER_KEYS: Mapping[kinds.Kind, frozenset[str]] = {
    kinds.Kind.TALOS_CLUSTER: frozenset({RESUME_ANNOTATION, records.ADOPTION}),
    kinds.Kind.TALOS_OPERATION: frozenset(),
    kinds.Kind.ICHOR_INSTALLATION: frozenset({UNHALT_ANNOTATION}),
}

#: Keys the webhook writes into the object it admits; its stamp check judges them.
STAMP_KEYS = frozenset({records.RECORDS, records.OVERRIDE_BY})

#: The operator's marks today, with what each records (for messages and documentation;
#: any other reserved key is refused from a person as well).
OPERATOR_MARKS: Mapping[str, str] = {
    STARTED_BY_LABEL: "that the ichor operator started the operation by itself "
    "(auto-patch, the declarative mode)",
    HALTED_ANNOTATION: "that the fleet's record holds the halt of this failed operation",
    ATTEMPT_ANNOTATION: "the attempt token the operator made the operation's name from",
    STARTED_FOR_ANNOTATION: "why the operator started the operation",
}


def reserved(key: str) -> bool:
    """Whether ``key`` (a label or annotation key) is in the ``ichor.dev`` domain."""
    prefix, slash, _ = key.partition("/")
    return bool(slash) and (prefix == DOMAIN or prefix.endswith("." + DOMAIN))


def operators(kind: kinds.Kind, key: str) -> bool:
    """Whether only the operator may set, change or remove ``key`` on ``kind``."""
    return reserved(key) and key not in USER_KEYS[kind] and key not in STAMP_KEYS
