"""Before the first node is touched: can the talosconfig upgrade at all; pure.

A talosconfig whose client certificate expired, or whose role cannot upgrade, used to be
found out by the first failed Job, after the operation had started. Talos authorizes by
the certificate alone: its roles are the certificate's Organizations (apid's role
injector, pkg/grpc/middleware/authz), and ``LifecycleService/Upgrade`` and the
``Kubeconfig`` talosctl drains with need ``os:admin`` (machined's role table,
internal/app/machined/pkg/system/services/machined.go). So the certificate is read here,
as data: its ``notAfter`` and its Organizations, with a small DER reader (the X.509
fields are the RFC 5280 ones; nothing in it is trusted, and it never raises on garbage).
Whether every node's Talos API answers is the read Job's to say (``talosread``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

#: The role an upgrade needs: LifecycleService/Upgrade and Kubeconfig are os:admin's.
ADMIN_ROLE = "os:admin"
#: id-at-organizationName (RFC 5280, 2.5.4.10), DER-encoded.
_ORGANIZATION = bytes([0x06, 0x03, 0x55, 0x04, 0x0A])
_MAX_DER = 64 * 1024


class Unreadable(ValueError):
    """The talosconfig or its certificate cannot be read."""


@dataclass(frozen=True)
class ClientCertificate:
    not_after: datetime
    roles: tuple[str, ...]


def _der_items(
    data: bytes, start: int = 0, end: int | None = None
) -> Iterator[tuple[int, int, int]]:
    """(tag, content start, content end) of each DER element between start and end."""
    end = len(data) if end is None else end
    at = start
    while at < end:
        if at + 2 > end:
            raise Unreadable("a DER element is cut short")
        tag, length = data[at], data[at + 1]
        at += 2
        if length & 0x80:
            count = length & 0x7F
            if count == 0 or count > 4 or at + count > end:
                raise Unreadable("a DER length is not one this reader takes")
            length = int.from_bytes(data[at : at + count], "big")
            at += count
        if at + length > end:
            raise Unreadable("a DER element runs past its container")
        yield tag, at, at + length
        at += length


def _time(tag: int, raw: bytes) -> datetime:
    text = raw.decode("ascii", errors="replace")
    try:
        if tag == 0x17:  # UTCTime YYMMDDHHMMSSZ
            moment = datetime.strptime(text, "%y%m%d%H%M%SZ")
        elif tag == 0x18:  # GeneralizedTime YYYYMMDDHHMMSSZ
            moment = datetime.strptime(text, "%Y%m%d%H%M%SZ")
        else:
            raise Unreadable("the certificate's validity is not a time")
    except ValueError as error:
        raise Unreadable("the certificate's validity is not a time") from error
    return moment.replace(tzinfo=UTC)


def read_certificate(der: bytes) -> ClientCertificate:
    """``notAfter`` and the subject's Organizations of an X.509 certificate (DER)."""
    if len(der) > _MAX_DER:
        raise Unreadable("the certificate is larger than any client certificate")
    tbs = _tbs_fields(der)
    return ClientCertificate(
        not_after=_not_after(der, tbs[3]), roles=tuple(_organizations(der, tbs[4]))
    )


def _tbs_fields(der: bytes) -> list[tuple[int, int, int]]:
    """The TBSCertificate's fields from serialNumber on (its version dropped): at least
    serialNumber, signature, issuer, validity and subject, the last two sequences."""
    top = list(_der_items(der))
    if len(top) != 1 or top[0][0] != 0x30:
        raise Unreadable("it is not one DER certificate")
    certificate = list(_der_items(der, top[0][1], top[0][2]))
    if not certificate or certificate[0][0] != 0x30:
        raise Unreadable("it holds no TBSCertificate")
    tbs = list(_der_items(der, certificate[0][1], certificate[0][2]))
    if tbs and tbs[0][0] == 0xA0:  # [0] version
        tbs = tbs[1:]
    if len(tbs) < 5 or tbs[3][0] != 0x30 or tbs[4][0] != 0x30:
        raise Unreadable("its TBSCertificate lacks a validity or a subject")
    return tbs


def _not_after(der: bytes, validity: tuple[int, int, int]) -> datetime:
    times = list(_der_items(der, validity[1], validity[2]))
    if len(times) != 2:
        raise Unreadable("its validity is not two times")
    tag, a, b = times[1]
    return _time(tag, der[a:b])


def _organizations(der: bytes, subject: tuple[int, int, int]) -> Iterator[str]:
    """The subject's Organizations (its roles, for Talos), in order."""
    for _set_tag, sa, sb in _der_items(der, subject[1], subject[2]):
        for _seq_tag, qa, qb in _der_items(der, sa, sb):
            parts = list(_der_items(der, qa, qb))
            if len(parts) == 2 and der[parts[0][1] - 2 : parts[0][2]] == _ORGANIZATION:
                yield der[parts[1][1] : parts[1][2]].decode("utf-8", errors="replace")


def pem_certificate(pem: bytes | str) -> ClientCertificate:
    """The certificate of a PEM block."""
    text = pem.decode("ascii", errors="replace") if isinstance(pem, bytes) else pem
    body = "".join(
        line.strip() for line in text.splitlines() if line.strip() and not line.startswith("-----")
    )
    try:
        der = base64.b64decode(body, validate=True)
    except binascii.Error as error:
        raise Unreadable("its crt is not a PEM certificate") from error
    return read_certificate(der)


def client_certificate(talosconfig: str | bytes) -> ClientCertificate:
    """The client certificate of a talosconfig's current context."""
    try:
        loaded: Any = yaml.safe_load(talosconfig)
    except yaml.YAMLError as error:
        raise Unreadable("the talosconfig is not YAML") from error
    if not isinstance(loaded, dict):
        raise Unreadable("the talosconfig is not a mapping")
    contexts = loaded.get("contexts")
    name = loaded.get("context")
    context = contexts.get(name) if isinstance(contexts, dict) else None
    if not isinstance(context, dict) or not isinstance(context.get("crt"), str):
        raise Unreadable("the talosconfig's context has no client certificate (crt)")
    try:
        pem = base64.b64decode(context["crt"], validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError) as error:
        raise Unreadable("its crt is not a base64 PEM certificate") from error
    return pem_certificate(pem)


def refusal_pem(
    crt_pem: bytes | str, *, now: datetime, deadline_seconds: float, what: str
) -> str | None:
    """``refusal`` of a client certificate already taken out of its talosconfig."""
    return _refusal(pem_certificate, crt_pem, now=now, deadline_seconds=deadline_seconds, what=what)


def refusal(
    talosconfig: str | bytes, *, now: datetime, deadline_seconds: float, what: str
) -> str | None:
    """Why the talosconfig cannot carry the operation (None: it can): unreadable, its
    certificate expiring before ``now`` + ``deadline_seconds`` (the longest one node's
    Job may run), or without ``os:admin``."""
    return _refusal(
        client_certificate, talosconfig, now=now, deadline_seconds=deadline_seconds, what=what
    )


def _refusal(
    read: Callable[[bytes | str], ClientCertificate],
    source: bytes | str,
    *,
    now: datetime,
    deadline_seconds: float,
    what: str,
) -> str | None:
    try:
        certificate = read(source)
    except Unreadable as error:
        return f"the client certificate of {what} cannot be read ({error})"
    return _judge(certificate, now=now, deadline_seconds=deadline_seconds, what=what)


def _judge(
    certificate: ClientCertificate, *, now: datetime, deadline_seconds: float, what: str
) -> str | None:
    until = now + timedelta(seconds=deadline_seconds)
    expires = certificate.not_after.strftime("%Y-%m-%d %H:%M UTC")
    if certificate.not_after <= now:
        return (
            f"the client certificate of {what} expired on {expires}; issue a new talosconfig "
            f"(talosctl config new) and update the Secret"
        )
    if certificate.not_after < until:
        return (
            f"the client certificate of {what} expires on {expires}, before this operation's "
            f"deadline ({until.strftime('%Y-%m-%d %H:%M UTC')}: one node's Job may run "
            f"{deadline_seconds / 3600:g} h, ICHOR_JOB_DEADLINE); issue a new talosconfig "
            f"(talosctl config new) and update the Secret"
        )
    if ADMIN_ROLE not in certificate.roles:
        shown = ", ".join(certificate.roles) or "none"
        return (
            f"the client certificate of {what} has the Talos roles {shown}, and an upgrade "
            f"needs {ADMIN_ROLE} (LifecycleService/Upgrade, and the kubeconfig talosctl drains "
            f"with); issue a talosconfig with os:admin (talosctl config new --roles os:admin)"
        )
    return None
