"""A kubeconfig or talosconfig from a Secret is data: inline credentials, one cluster and
one context, every other field refused with a sentence naming it; hostile YAML gets a
bounded sentence of the project's own, never the Secret's text."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ichor.kube import clients, credentials
from ichor.settings import CredentialSettings, SettingsError
from tests.support import credential_files as files

WHAT = "the kubeconfig in key 'kubeconfig' of Secret team-a/prod"
TALOS = "the talosconfig in key 'talosconfig' of Secret team-a/prod"
#: A sentence is at most this long, whatever the Secret holds.
BOUND = 600
OPEN = CredentialSettings(allow_proxy=True, allow_insecure_tls=True)


def refused(config: object, *, policy: CredentialSettings | None = None) -> credentials.Refused:
    raw = config if isinstance(config, str | bytes) else files.text(config)
    with pytest.raises(credentials.Refused) as caught:
        credentials.read_kubeconfig(raw, what=WHAT, policy=policy)
    message = str(caught.value)
    assert message.startswith(f"{WHAT} is refused: "), message
    assert len(message) <= BOUND, message
    return caught.value


def talos_refused(config: object) -> credentials.Refused:
    raw = config if isinstance(config, str | bytes) else files.text(config)
    with pytest.raises(credentials.Refused) as caught:
        credentials.read_talosconfig(raw, what=TALOS)
    assert str(caught.value).startswith(f"{TALOS} is refused: ")
    assert len(str(caught.value)) <= BOUND
    return caught.value


# --- what is accepted -----------------------------------------------------------------------


def test_inline_credentials_are_read_and_nothing_else_is_kept() -> None:
    found = credentials.read_kubeconfig(files.text(files.kubeconfig(token="abc.def")), what=WHAT)
    assert found.server == "https://127.0.0.1:6443"
    assert found.token == "abc.def"
    assert found.ca_pem == files.authority().cert_pem
    assert found.client_cert_pem == files.client().cert
    assert found.client_key_pem == files.client().key
    assert (found.insecure, found.proxy_url, found.tls_server_name) == (False, None, None)
    assert "abc.def" not in repr(found)
    assert "PRIVATE" not in repr(found)


def test_a_kubeconfig_as_json_with_a_namespace_and_empty_preferences_is_read() -> None:
    config = files.kubeconfig()
    config["preferences"] = {}
    config["contexts"][0]["context"]["namespace"] = "kube-system"
    import json

    assert credentials.read_kubeconfig(json.dumps(config), what=WHAT).server


def test_a_talosconfig_with_one_context_is_read() -> None:
    found = credentials.read_talosconfig(files.text(files.talosconfig()), what=TALOS)
    assert (found.context, found.endpoints, found.nodes) == (
        "prod",
        ("10.5.0.2:50000",),
        ("10.5.0.2",),
    )
    assert found.key_pem == files.talos_client().key


# --- every field that does more than carry a credential -------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "named", "words"),
    [
        ("exec", files.exec_user("id")["exec"], "users[0].user.exec", "runs a command"),
        (
            "auth-provider",
            {"name": "oidc", "config": {"client-id": "x"}},
            "users[0].user.auth-provider",
            "auth-provider plugin",
        ),
        ("tokenFile", "/var/run/secrets/token", "users[0].user.tokenFile", "reads a file"),
        (
            "client-certificate",
            "/etc/ssl/c.crt",
            "users[0].user.client-certificate",
            "reads a file",
        ),
        ("client-key", "/etc/ssl/c.key", "users[0].user.client-key", "reads a file"),
        ("username", "admin", "users[0].user.username", "basic authentication"),
        ("as", "system:admin", "users[0].user.as", "impersonates"),
        ("as-groups", ["system:masters"], "users[0].user.as-groups", "impersonates"),
        ("extensions", [], "users[0].user.extensions", "does not read"),
    ],
)
def test_a_user_field_that_runs_reads_or_acts_is_refused_by_name(
    field: str, value: object, named: str, words: str
) -> None:
    error = refused(files.with_user(files.kubeconfig(), **{field: value}))
    assert error.field == named
    assert f"{named} " in str(error)
    assert words in str(error)


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        (
            "certificate-authority",
            "/etc/kubernetes/pki/ca.crt",
            "clusters[0].cluster.certificate-authority",
        ),
        ("disable-compression", True, "clusters[0].cluster.disable-compression"),
        ("extensions", [{"name": "x", "extension": {}}], "clusters[0].cluster.extensions"),
    ],
)
def test_a_cluster_field_beyond_the_whitelist_is_refused_by_name(
    field: str, value: object, named: str
) -> None:
    assert refused(files.with_cluster(files.kubeconfig(), **{field: value})).field == named


def test_the_certificate_file_path_never_leaves_the_validator() -> None:
    """The old loader opened the path (``File does not exists: /etc/shadow``); now the
    path is neither opened nor named."""
    error = refused(files.with_user(files.kubeconfig(), **{"client-certificate": "/etc/shadow"}))
    assert "/etc/shadow" not in str(error)


def test_proxy_url_is_refused_unless_the_setting_allows_it() -> None:
    config = files.with_cluster(files.kubeconfig(), **{"proxy-url": "http://10.0.0.9:3128"})
    error = refused(config)
    assert error.field == "clusters[0].cluster.proxy-url"
    assert "ICHOR_CREDENTIALS_ALLOW_PROXY" in str(error)
    allowed = credentials.read_kubeconfig(files.text(config), what=WHAT, policy=OPEN)
    assert allowed.proxy_url == "http://10.0.0.9:3128"
    socks = files.with_cluster(files.kubeconfig(), **{"proxy-url": "socks5://10.0.0.9:1080"})
    assert refused(socks, policy=OPEN).field == "clusters[0].cluster.proxy-url"


def test_insecure_skip_tls_verify_is_refused_unless_the_setting_allows_it() -> None:
    config = files.kubeconfig()
    del config["clusters"][0]["cluster"]["certificate-authority-data"]
    config = files.with_cluster(config, **{"insecure-skip-tls-verify": True})
    error = refused(config)
    assert error.field == "clusters[0].cluster.insecure-skip-tls-verify"
    assert "ICHOR_CREDENTIALS_ALLOW_INSECURE_TLS" in str(error)
    assert credentials.read_kubeconfig(files.text(config), what=WHAT, policy=OPEN).insecure
    # false is the default and says nothing
    plain = files.with_cluster(files.kubeconfig(), **{"insecure-skip-tls-verify": False})
    assert not credentials.read_kubeconfig(files.text(plain), what=WHAT).insecure
    # a string that reads as true to a Go reader is not a boolean here
    text = files.with_cluster(files.kubeconfig(), **{"insecure-skip-tls-verify": "true"})
    assert refused(text, policy=OPEN).field == "clusters[0].cluster.insecure-skip-tls-verify"


@pytest.mark.parametrize("entries", ["clusters", "users", "contexts"])
def test_two_entries_of_any_list_are_refused(entries: str) -> None:
    config = files.kubeconfig()
    second = copy.deepcopy(config[entries][0])
    second["name"] = "other"
    config[entries].append(second)
    error = refused(config)
    assert error.field == entries
    assert "holds 2 entries" in str(error)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda c: c.update({"current-context": "elsewhere"}), "current-context"),
        (lambda c: c.pop("current-context"), "current-context"),
        (lambda c: c["contexts"][0]["context"].update(cluster="x"), "contexts[0].context.cluster"),
        (lambda c: c["contexts"][0]["context"].update(user="x"), "contexts[0].context.user"),
        (
            lambda c: c["clusters"][0]["cluster"].update(server="http://10.0.0.1"),
            "clusters[0].cluster.server",
        ),
        (
            lambda c: c["clusters"][0]["cluster"].update(server="https://u:p@10.0.0.1"),
            "clusters[0].cluster.server",
        ),
        (
            lambda c: c["clusters"][0]["cluster"].update(server="https://h/?q=1"),
            "clusters[0].cluster.server",
        ),
        (lambda c: c["clusters"][0]["cluster"].pop("server"), "clusters[0].cluster.server"),
        (lambda c: c["users"][0]["user"].pop("client-key-data"), "users[0].user.client-key-data"),
        (lambda c: c["users"][0]["user"].update(token="a\r\nX-Injected: 1"), "users[0].user.token"),
        (lambda c: c["users"][0]["user"].update(token=["t"]), "users[0].user.token"),
        (
            lambda c: c["users"][0]["user"].update({"client-key-data": files.b64(b"not a key")}),
            "users[0].user.client-key-data",
        ),
        (
            lambda c: c["clusters"][0]["cluster"].update({"certificate-authority-data": "%%%"}),
            "clusters[0].cluster.certificate-authority-data",
        ),
        (lambda c: c["users"][0].update(user=False), "users[0].user"),
        (lambda c: c["users"][0].update(user=["token"]), "users[0].user"),
        (lambda c: c.update(apiVersion="v2"), "apiVersion"),
        (lambda c: c.update(preferences={"colors": True}), "preferences"),
    ],
)
def test_a_kubeconfig_that_does_not_name_its_one_entry_or_server_plainly_is_refused(
    change: Any, named: str
) -> None:
    config = files.kubeconfig()
    change(config)
    assert refused(config).field == named


def test_a_field_outside_the_format_is_refused_without_showing_its_name() -> None:
    """A key may be any text of the Secret: only the format's own words are shown."""
    error = refused(files.with_user(files.kubeconfig(), **{"AKIA-SECRET-VALUE": "x"}))
    assert "AKIA" not in str(error)
    assert error.field == "users[0].user.<a field>"
    error = refused({**files.kubeconfig(), "hunter2": 1})
    assert "hunter2" not in str(error)


# --- hostile YAML ------------------------------------------------------------------------------

LAUGHS = "\n".join(
    ["a: &a ['lol','lol','lol','lol','lol','lol','lol','lol','lol']"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("x" * (credentials.MAX_BYTES + 1), "over the 262,144"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        ("[" * 100_000, "not YAML"),
        ("a:\n" + "".join(f"{' ' * (2 * i)}- b{i}:\n" for i in range(1, 40)), "nests deeper"),
        (LAUGHS, "anchor or alias"),
        ("- a\n- b\n", "a list, not a mapping"),
        ("just a string", "a string, not a mapping"),
        ("", "empty, not a mapping"),
        ("a: 1\na: 2\n", "repeats a key"),
        ("a: !!binary aGk=\n", "YAML tag"),
        ("a: !!python/object:os.system x\n", "YAML tag"),
        ("<<: {exec: x}\n", "merge key"),
        ("a: 1\n---\nb: 2\n", "more than one YAML document"),
        ("? [a, b]\n: c\n", "not a plain value"),
        ("a: 'unterminated SECRET-TEXT\n", "not YAML (line"),
        ("a: [" + ",".join(["1"] * 30_000) + "]", "over 20,000"),
    ],
)
def test_hostile_yaml_gets_a_bounded_sentence_of_our_own(raw: str | bytes, words: str) -> None:
    error = refused(raw)
    assert words in str(error), str(error)
    assert "SECRET-TEXT" not in str(error)
    assert "lol" not in str(error)


def test_the_billion_laughs_is_refused_before_anything_is_built() -> None:
    """Nine levels of nine aliases: 387 million strings once expanded."""
    import time

    start = time.perf_counter()
    refused(LAUGHS)
    assert time.perf_counter() - start < 1.0


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
        ),
        max_leaves=30,
    )
)
def test_no_document_gets_an_exception_or_its_text_back(document: object) -> None:
    """Whatever the document, the answer is the project's sentence, never an exception of
    the parser, and no string of the document appears in it unless it is a word of the
    format (``exec``, ``server``)."""
    marked = {"SEKRIT-1": document, "clusters": [{"name": "SEKRIT-2", "cluster": document}]}
    with pytest.raises(credentials.Refused) as caught:
        credentials.read_kubeconfig(files.text(marked), what=WHAT)
    assert "SEKRIT" not in str(caught.value)
    assert len(str(caught.value)) <= BOUND


# --- the talosconfig -------------------------------------------------------------------------


def _talos(**changes: Any) -> dict[str, Any]:
    config = files.talosconfig()
    config["contexts"]["prod"].update(changes)
    return config


@pytest.mark.parametrize(
    ("config", "named", "words"),
    [
        (
            _talos(auth={"siderov1": {"identity": "me@example.com"}}),
            "contexts.prod.auth",
            "SideroV1",
        ),
        (
            _talos(auth={"basic": {"username": "u", "password": "p"}}),
            "contexts.prod.auth",
            "password",
        ),
        (_talos(target="10.5.0.2"), "contexts.prod.target", "deprecated"),
        (
            _talos(**{"proxy-url": "http://10.0.0.9:3128"}),
            "contexts.prod.proxy-url",
            "ICHOR_CREDENTIALS_ALLOW_PROXY",
        ),
        (_talos(ca="/etc/talos/ca.crt"), "contexts.prod.ca", "not base64"),
        (
            _talos(crt=files.b64(b"/var/lib/talos/admin.crt")),
            "contexts.prod.crt",
            "not a PEM certificate",
        ),
        (_talos(endpoints=[]), "contexts.prod.endpoints", "is empty"),
        (
            _talos(endpoints=["unix:///var/run/apid.sock"]),
            "contexts.prod.endpoints[0]",
            "not a host name",
        ),
        (_talos(endpoints="10.5.0.2"), "contexts.prod.endpoints", "not a list"),
        (_talos(secret_key="x"), "contexts.prod.<a field>", "not a field"),
    ],
)
def test_a_talosconfig_with_anything_but_inline_keys_is_refused_by_name(
    config: dict[str, Any], named: str, words: str
) -> None:
    error = talos_refused(config)
    assert error.field == named
    assert words in str(error)


def test_a_talosconfig_without_its_keys_or_with_two_contexts_is_refused() -> None:
    for part in ("ca", "crt", "key"):
        config = files.talosconfig()
        del config["contexts"]["prod"][part]
        assert talos_refused(config).field == f"contexts.prod.{part}"
    two = files.talosconfig()
    two["contexts"]["other"] = copy.deepcopy(two["contexts"]["prod"])
    assert "holds 2 contexts" in str(talos_refused(two))
    elsewhere = files.talosconfig()
    elsewhere["context"] = "other"
    assert talos_refused(elsewhere).field == "context"
    odd = files.talosconfig()
    odd["contexts"] = {"a secret\nname": odd["contexts"].pop("prod")}
    odd["context"] = "a secret\nname"
    assert "a secret" not in str(talos_refused(odd))
    assert "not a mapping" in str(talos_refused("context: test\n"))


# --- the client built from it ------------------------------------------------------------------


async def test_an_exec_kubeconfig_runs_nothing(tmp_path: Path) -> None:
    """The attack: the client library ran the command while loading."""
    marker = tmp_path / "ran"
    config = files.kubeconfig(cert=False)
    config["users"][0]["user"] = files.exec_user(f"touch {marker}; echo 'bad' >&2; exit 1")
    with pytest.raises(clients.KubeconfigError) as caught:
        await clients.client_from_kubeconfig(files.text(config), origin=WHAT)
    assert not marker.exists()
    assert "users[0].user.exec runs a command" in str(caught.value)
    assert "bad" not in str(caught.value)


async def test_a_token_file_is_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "operator-token"
    secret.write_text("the-operators-token")
    config = files.with_user(files.kubeconfig(cert=False), tokenFile=str(secret))
    with pytest.raises(clients.KubeconfigError, match=r"users\[0\]\.user\.tokenFile reads a file"):
        await clients.client_from_kubeconfig(files.text(config), origin=WHAT)


async def test_the_client_carries_the_checked_fields_and_keeps_no_file() -> None:
    config = files.kubeconfig(token="t0k")
    api = await clients.client_from_kubeconfig(files.text(config), origin=WHAT)
    try:
        configuration = api.configuration
        assert configuration.host == "https://127.0.0.1:6443"
        assert configuration.api_key == {"BearerToken": "Bearer t0k"}
        assert configuration.verify_ssl
        assert configuration.proxy is None
        assert configuration.ssl_ca_cert is None
        assert configuration.cert_file is None
    finally:
        await api.close()


async def test_a_pem_openssl_cannot_load_is_refused_in_our_words() -> None:
    broken = b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"
    config = files.kubeconfig(ca=broken)
    with pytest.raises(clients.KubeconfigError) as caught:
        await clients.client_from_kubeconfig(files.text(config), origin=WHAT)
    assert "certificate-authority-data is not a certificate OpenSSL can load" in str(caught.value)
    other = files.authority().issue_client(user="x")
    mismatched = files.kubeconfig(client_pem=type(other)(cert=other.cert, key=files.client().key))
    with pytest.raises(clients.KubeconfigError, match="not a certificate and its key"):
        await clients.client_from_kubeconfig(files.text(mismatched), origin=WHAT)


# --- the settings --------------------------------------------------------------------------------


def test_the_switches_are_off_unless_set_to_true() -> None:
    assert CredentialSettings.from_env({}) == CredentialSettings()
    on = CredentialSettings.from_env(
        {"ICHOR_CREDENTIALS_ALLOW_PROXY": "TRUE", "ICHOR_CREDENTIALS_ALLOW_INSECURE_TLS": "true"}
    )
    assert on.allow_proxy
    assert on.allow_insecure_tls
    off = CredentialSettings.from_env({"ICHOR_CREDENTIALS_ALLOW_PROXY": "false"})
    assert not off.allow_proxy
    for typo in ("0", "yes", "no", "flase"):
        with pytest.raises(SettingsError, match="must be true or false"):
            CredentialSettings.from_env({"ICHOR_CREDENTIALS_ALLOW_PROXY": typo})


# --- what `ichor adopt` stores -----------------------------------------------------------------


def test_adopt_stores_the_one_context_it_used_with_its_files_inlined(tmp_path: Path) -> None:
    """A person's kubeconfig: two contexts, certificates as files. adopt stores only the
    chosen context, flattened, which the operator then reads."""
    from ichor.cli import clusters

    (tmp_path / "ca.crt").write_bytes(files.authority().cert_pem)
    (tmp_path / "me.crt").write_bytes(files.client().cert)
    (tmp_path / "me.key").write_bytes(files.client().key)
    whole = files.kubeconfig(cert=False)
    whole["clusters"][0]["cluster"] = {
        "server": "https://10.0.0.1:6443",
        "certificate-authority": "ca.crt",
    }
    whole["users"][0]["user"] = {"client-certificate": "me.crt", "client-key": "me.key"}
    other = copy.deepcopy(whole["contexts"][0])
    other["name"] = "other"
    whole["contexts"].append(other)
    whole["users"].append({"name": "exec-user", "user": files.exec_user("id")})
    path = tmp_path / "config"
    path.write_text(files.text(whole))
    stored = clusters._stored_kubeconfig(path, "workload")
    found = credentials.read_kubeconfig(stored, what=WHAT)
    assert found.ca_pem == files.authority().cert_pem
    assert found.client_key_pem == files.client().key
    assert found.server == "https://10.0.0.1:6443"


def test_adopt_refuses_an_exec_user_before_writing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ichor.cli import clusters

    config = files.kubeconfig(cert=False)
    config["users"][0]["user"] = files.exec_user("aws eks get-token")
    path = tmp_path / "config"
    path.write_text(files.text(config))
    with pytest.raises(SystemExit):
        clusters._stored_kubeconfig(path, None)
    err = capsys.readouterr().err
    assert "users[0].user.exec runs a command" in err
    assert "Nothing was written." in err
