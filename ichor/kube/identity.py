"""Who the operator is to the API server: the username its own writes carry.

The webhook lets only the operator write the status of Ichor's kinds, so it needs the
exact ``userInfo.username`` of the operator's requests. It asks the API server once, with
a SelfSubjectReview made with the operator's own credentials, so no setting can name the
wrong account. Without an answer there is no identity, and callers treat a status write
as undecided (denied, retry) rather than allowed.

More in docs/design/notes.md, "ichor/kube/identity.py".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

#: Seconds the SelfSubjectReview may take.
REVIEW_TIMEOUT = 5.0

SELF_SUBJECT_REVIEW: Mapping[str, str] = {
    "apiVersion": "authentication.k8s.io/v1",
    "kind": "SelfSubjectReview",
}


class IdentityUnknown(RuntimeError):
    """The API server did not say who the operator is (unreachable, refused, no username)."""


@dataclass(frozen=True)
class Identity:
    """The operator as the API server authenticates it (``status.userInfo``)."""

    username: str
    uid: str = ""
    groups: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.username


def from_review(answer: Mapping[str, Any]) -> Identity:
    """The identity in a SelfSubjectReview answer (as JSON); raises ``IdentityUnknown``."""
    status = answer.get("status")
    info = status.get("userInfo") if isinstance(status, Mapping) else None
    if not isinstance(info, Mapping):
        raise IdentityUnknown("the SelfSubjectReview answer carries no status.userInfo")
    username = info.get("username")
    if not isinstance(username, str) or not username:
        raise IdentityUnknown("the SelfSubjectReview answer names no username")
    uid = info.get("uid")
    groups = info.get("groups")
    return Identity(
        username=username,
        uid=uid if isinstance(uid, str) else "",
        groups=tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else (),
    )


async def who_am_i(api: ApiClient) -> Identity:
    """The identity ``api``'s credentials authenticate as; raises ``IdentityUnknown``."""
    authentication = client.AuthenticationV1Api(api)
    try:
        answer = await authentication.create_self_subject_review(
            body=cast(Any, dict(SELF_SUBJECT_REVIEW)), _request_timeout=REVIEW_TIMEOUT
        )
    except ApiException as error:
        raise IdentityUnknown(
            f"the SelfSubjectReview was answered {error.status} {error.reason}"
        ) from None
    except (TimeoutError, OSError, aiohttp.ClientError) as error:
        raise IdentityUnknown(f"the SelfSubjectReview failed: {error!r}") from None
    plain = api.sanitize_for_serialization(answer)
    if not isinstance(plain, Mapping):
        raise IdentityUnknown("the SelfSubjectReview answer is not an object")
    return from_review(plain)
