"""The named steps of ``credentials._scan`` and ``credentials.read_kubeconfig``: each
alone refuses what it is for and passes the rest, in the order the readers ask them."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from ichor.kube import credentials
from ichor.settings import CredentialSettings
from tests.support import credential_files as files

READER = credentials._Reader(
    what="W",
    words=credentials._KUBE_WORDS,
    refused=credentials._KUBE_REFUSED,
    step=credentials._INLINE,
)
OPEN = CredentialSettings(allow_proxy=True, allow_insecure_tls=True)


def events(text: str) -> list[Any]:
    return list(yaml.parse(text, Loader=credentials.SAFE_LOADER))


def run(step: Any, text: str) -> list[str]:
    """Every reason ``step`` gives over the events of ``text``, state shared as in
    ``_scan`` (the depth step keeps the frames the key step reads)."""
    state = credentials._ScanState()
    found = []
    for event in events(text):
        why = step(state, event)
        if why is not None:
            found.append(why)
        if step is not credentials._scan_depth:
            credentials._scan_depth(state, event)
    return found


def test_the_scan_steps_run_in_their_order() -> None:
    assert (
        credentials._scan_count,
        credentials._scan_alias,
        credentials._scan_documents,
        credentials._scan_tag,
        credentials._scan_key,
        credentials._scan_depth,
    ) == credentials._SCAN_STEPS


def test_scan_count() -> None:
    state = credentials._ScanState(events=credentials.MAX_EVENTS - 1)
    assert credentials._scan_count(state, None) is None
    assert credentials._scan_count(state, None) == (
        f"it holds over {credentials.MAX_EVENTS:,} YAML values"
    )


def test_scan_alias() -> None:
    found = [credentials._scan_alias(credentials._ScanState(), e) for e in events("a: &x 1\nb: *x")]
    assert found.count("it uses a YAML anchor or alias") == 2
    assert not any(credentials._scan_alias(credentials._ScanState(), e) for e in events("a: 1"))


def test_scan_documents() -> None:
    state = credentials._ScanState()
    found = [credentials._scan_documents(state, e) for e in events("a: 1\n---\nb: 2\n")]
    assert found.count("it holds more than one YAML document") == 1
    assert state.documents == 2


def test_scan_tag() -> None:
    assert "it uses a YAML tag" in [
        credentials._scan_tag(credentials._ScanState(), e) for e in events("a: !!str 1")
    ]
    assert not any(credentials._scan_tag(credentials._ScanState(), e) for e in events("a: '1'"))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("a: 1\na: 2\n", "a mapping repeats a key"),
        ("<<: {a: 1}\n", "it uses a YAML merge key"),
        ("? [a]\n: 1\n", "a key of a mapping is not a plain value"),
    ],
)
def test_scan_key(text: str, why: str) -> None:
    assert run(credentials._scan_key, text)[:1] == [why]


def test_scan_key_reads_values_and_other_mappings_apart() -> None:
    assert run(credentials._scan_key, "a: a\nb: {a: 1}\nc: [a, a]\n") == []


def test_scan_depth() -> None:
    deep = "[" * (credentials.MAX_DEPTH + 1) + "]" * (credentials.MAX_DEPTH + 1)
    assert run(credentials._scan_depth, deep) == [
        f"it nests deeper than {credentials.MAX_DEPTH} levels"
    ]
    shallow = "[" * credentials.MAX_DEPTH + "]" * credentials.MAX_DEPTH
    assert run(credentials._scan_depth, shallow) == []


def refusal(call: Any, *args: Any, **kwargs: Any) -> credentials.Refused:
    with pytest.raises(credentials.Refused) as caught:
        call(*args, **kwargs)
    return caught.value


def good() -> dict[str, Any]:
    return files.kubeconfig()


def test_kube_top() -> None:
    credentials._kube_top(READER, good())
    for key, value, field in [
        ("apiVersion", "v2", "apiVersion"),
        ("kind", "List", "kind"),
        ("preferences", {"colors": True}, "preferences"),
    ]:
        assert refusal(credentials._kube_top, READER, {**good(), key: value}).field == field
    assert "is not a field" in str(refusal(credentials._kube_top, READER, {"x": 1}))


def test_kube_parts() -> None:
    parts = credentials._kube_parts(READER, good())
    assert parts.cluster["server"] == "https://127.0.0.1:6443"
    anonymous = good()
    del anonymous["users"][0]["user"]
    assert credentials._kube_parts(READER, anonymous).user == {}
    two = good()
    two["users"].append(copy.deepcopy(two["users"][0]))
    assert refusal(credentials._kube_parts, READER, two).field == "users"
    tokenfile = files.with_user(good(), tokenFile="/var/run/token")
    assert refusal(credentials._kube_parts, READER, tokenfile).field == "users[0].user.tokenFile"


def test_kube_names() -> None:
    config = good()
    credentials._kube_names(READER, config, credentials._kube_parts(READER, config))
    config["current-context"] = "other"
    parts = credentials._kube_parts(READER, config)
    assert refusal(credentials._kube_names, READER, config, parts).field == "current-context"
    config = good()
    config["contexts"][0]["context"]["namespace"] = 5
    parts = credentials._kube_parts(READER, config)
    found = refusal(credentials._kube_names, READER, config, parts)
    assert found.field == "contexts[0].context.namespace"


def test_kube_insecure() -> None:
    assert credentials._kube_insecure(READER, {}, CredentialSettings()) is False
    assert credentials._kube_insecure(READER, {"insecure-skip-tls-verify": True}, OPEN) is True
    skip = "clusters[0].cluster.insecure-skip-tls-verify"
    for cluster, policy in [
        ({"insecure-skip-tls-verify": "yes"}, OPEN),
        ({"insecure-skip-tls-verify": True}, CredentialSettings()),
        ({"insecure-skip-tls-verify": True, "certificate-authority-data": "x"}, OPEN),
    ]:
        assert refusal(credentials._kube_insecure, READER, cluster, policy).field == skip


def test_kube_token() -> None:
    assert credentials._kube_token(READER, {}) is None
    assert credentials._kube_token(READER, {"token": "abc.def"}) == "abc.def"
    for token in ["a b", "é", "", 7, "t" * (credentials.MAX_TOKEN + 1)]:
        found = refusal(credentials._kube_token, READER, {"token": token})
        assert found.field == "users[0].user.token"


def test_kube_client_pair() -> None:
    credentials._kube_client_pair(READER, {})
    credentials._kube_client_pair(READER, {"client-certificate-data": "c", "client-key-data": "k"})
    found = refusal(credentials._kube_client_pair, READER, {"client-certificate-data": "c"})
    assert found.field == "users[0].user.client-key-data"
    found = refusal(credentials._kube_client_pair, READER, {"client-key-data": "k"})
    assert found.field == "users[0].user.client-certificate-data"


def test_kube_values() -> None:
    config = files.with_cluster(good(), **{"tls-server-name": "api", "proxy-url": "http://p:3"})
    parts = credentials._kube_parts(READER, config)
    read = credentials._kube_values(
        READER, parts, server="https://s", insecure=False, token=None, policy=OPEN
    )
    assert read.ca_pem is not None
    assert read.client_cert_pem is not None
    assert read.client_key_pem is not None
    assert (read.tls_server_name, read.proxy_url, read.server) == ("api", "http://p:3", "https://s")
    found = refusal(
        credentials._kube_values,
        READER,
        parts,
        server="https://s",
        insecure=False,
        token=None,
        policy=CredentialSettings(),
    )
    assert found.field == "clusters[0].cluster.proxy-url"
    config = files.with_cluster(good(), **{"tls-server-name": None})
    parts = credentials._kube_parts(READER, config)
    found = refusal(
        credentials._kube_values,
        READER,
        parts,
        server="https://s",
        insecure=False,
        token=None,
        policy=OPEN,
    )
    assert found.field == "clusters[0].cluster.tls-server-name"
