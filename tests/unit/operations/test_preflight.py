"""The talosconfig read before any node is touched: expiry, role, garbage."""

from __future__ import annotations

import base64
import datetime

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.controller.talosoperation import preflight
from tests.harness import certs

NOW = datetime.datetime.now(datetime.UTC)
AUTHORITY = certs.Authority.create("talos")


def talosconfig(
    *, roles: tuple[str, ...] = ("os:admin",), not_after: datetime.datetime | None = None
) -> str:
    client = AUTHORITY.issue_client(user="ops", groups=roles, not_after=not_after)

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return yaml.safe_dump(
        {
            "context": "prod",
            "contexts": {
                "prod": {
                    "endpoints": ["10.0.0.1"],
                    "ca": b64(AUTHORITY.cert_pem),
                    "crt": b64(client.cert),
                    "key": b64(client.key),
                }
            },
        }
    )


def test_the_certificate_is_read_as_the_x509_library_reads_it() -> None:
    end = (NOW + datetime.timedelta(days=3)).replace(microsecond=0)
    found = preflight.client_certificate(
        talosconfig(roles=("os:reader", "os:admin"), not_after=end)
    )
    assert found.not_after == end
    assert found.roles == ("os:reader", "os:admin")


def test_a_valid_admin_certificate_passes() -> None:
    assert preflight.refusal(talosconfig(), now=NOW, deadline_seconds=6 * 3600, what="x") is None


def test_an_expired_certificate_is_refused_with_the_date() -> None:
    past = (NOW - datetime.timedelta(days=2)).replace(microsecond=0)
    said = preflight.refusal(
        talosconfig(not_after=past), now=NOW, deadline_seconds=3600, what="the talosconfig"
    )
    assert said is not None
    assert f"expired on {past.strftime('%Y-%m-%d %H:%M UTC')}" in said
    assert "talosctl config new" in said


def test_a_certificate_expiring_before_the_deadline_is_refused() -> None:
    soon = NOW + datetime.timedelta(hours=1)
    said = preflight.refusal(
        talosconfig(not_after=soon), now=NOW, deadline_seconds=6 * 3600, what="the talosconfig"
    )
    assert said is not None
    assert "before this operation's deadline" in said


@pytest.mark.parametrize("roles", [("os:reader",), ("os:operator",), ()])
def test_a_certificate_without_os_admin_is_refused(roles: tuple[str, ...]) -> None:
    said = preflight.refusal(talosconfig(roles=roles), now=NOW, deadline_seconds=60, what="t")
    assert said is not None
    assert "needs os:admin" in said


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600))
def test_garbage_never_raises_past_unreadable(data: bytes) -> None:
    with pytest.raises(preflight.Unreadable):
        preflight.read_certificate(data)


@pytest.mark.parametrize("text", ["", "x: [", "- 1", "context: a\ncontexts: {a: {crt: '!!'}}"])
def test_an_unreadable_talosconfig_is_refused_in_words(text: str) -> None:
    said = preflight.refusal(text, now=NOW, deadline_seconds=60, what="t")
    assert said is not None
    assert said.startswith("the client certificate of t cannot be read")


def der(
    roles: tuple[str, ...] = ("os:admin",), not_after: datetime.datetime | None = None
) -> bytes:
    pem = AUTHORITY.issue_client(user="ops", groups=roles, not_after=not_after).cert
    body = "".join(line for line in pem.decode().splitlines() if not line.startswith("-----"))
    return base64.b64decode(body)


def test_tbs_fields_finds_validity_and_subject_and_refuses_other_shapes() -> None:
    data = der()
    fields = preflight._tbs_fields(data)
    assert len(fields) >= 5
    assert fields[3][0] == fields[4][0] == 0x30
    with pytest.raises(preflight.Unreadable, match="not one DER certificate"):
        preflight._tbs_fields(data + data)
    with pytest.raises(preflight.Unreadable, match="holds no TBSCertificate"):
        preflight._tbs_fields(bytes([0x30, 0x03, 0x02, 0x01, 0x01]))
    with pytest.raises(preflight.Unreadable, match="lacks a validity or a subject"):
        preflight._tbs_fields(bytes([0x30, 0x05, 0x30, 0x03, 0x02, 0x01, 0x01]))


def test_not_after_is_the_second_time_of_the_validity() -> None:
    end = (NOW + datetime.timedelta(days=9)).replace(microsecond=0)
    data = der(not_after=end)
    assert preflight._not_after(data, preflight._tbs_fields(data)[3]) == end
    one_time = bytes([0x30, 0x0F, 0x17, 0x0D, *b"250101000000Z"])
    with pytest.raises(preflight.Unreadable, match="not two times"):
        preflight._not_after(one_time, (0x30, 2, len(one_time)))


def test_organizations_are_the_subjects_in_order() -> None:
    data = der(roles=("os:reader", "os:admin"))
    assert list(preflight._organizations(data, preflight._tbs_fields(data)[4])) == [
        "os:reader",
        "os:admin",
    ]


def test_refusal_pem_reads_the_crt_itself_and_refuses_garbage_in_words() -> None:
    pem = AUTHORITY.issue_client(user="ops", groups=("os:reader",), not_after=None).cert
    said = preflight.refusal_pem(pem, now=NOW, deadline_seconds=60, what="t")
    assert said is not None
    assert "needs os:admin" in said
    bad = preflight.refusal_pem("!!", now=NOW, deadline_seconds=60, what="t")
    assert bad == "the client certificate of t cannot be read (its crt is not a PEM certificate)"
