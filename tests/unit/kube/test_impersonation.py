"""Whose account reads the cluster the operator runs in for a TalosCluster, and the
client that asks as that account (without an API server: the requests are caught before
they leave). tests/component/tenants/test_impersonation.py runs the same on a real one."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.aio import client
from kubernetes.aio.client.api_client import ApiClient
from kubernetes.aio.client.exceptions import ApiException

from ichor.kube import accounts, errors, impersonation
from ichor.kube.accounts import Origin, ServiceAccount, Unnamed

READER = ServiceAccount(namespace="tenant-a", name="reader", origin=Origin.SPEC)


# --- which account ------------------------------------------------------------------------


def test_the_spec_names_the_account_over_the_fleet() -> None:
    chosen = accounts.choose(namespace="tenant-a", spec="reader", fleet="fleet", required=True)
    assert chosen == READER
    assert chosen.username == "system:serviceaccount:tenant-a:reader"


def test_the_fleet_default_is_taken_when_the_spec_names_none() -> None:
    chosen = accounts.choose(namespace="tenant-b", spec=None, fleet="ichor-reader", required=True)
    assert chosen == ServiceAccount("tenant-b", "ichor-reader", Origin.FLEET)
    assert accounts.choose(namespace="t", spec="", fleet="f", required=True) == ServiceAccount(
        "t", "f", Origin.FLEET
    )


def test_without_a_name_the_namespace_default_reads_unless_one_is_required() -> None:
    assert accounts.choose(namespace="t", spec=None, fleet=None, required=False) == (
        ServiceAccount("t", "default", Origin.NAMESPACE)
    )
    refused = accounts.choose(namespace="t", spec=None, fleet=None, required=True)
    assert isinstance(refused, Unnamed)
    assert "spec.serviceAccountName" in refused.message
    assert "defaultServiceAccountName" in refused.message
    assert accounts.REQUIRE_SETTING in refused.message


@pytest.mark.parametrize(
    "name",
    ["other:reader", "system:serviceaccount:kube-system:admin", "../x", "Reader", "a/b", "-a",
     "a" * 254, "reader\r\nImpersonate-Group: system:masters", ""],
)  # fmt: skip
def test_a_name_that_is_no_service_accounts_is_never_used(name: str) -> None:
    """The account is always of the TalosCluster's own namespace: no name can point at
    another namespace, another user, or carry a header."""
    for spec, fleet in ((name, None), (None, name), (name, "fleet")):
        chosen = accounts.choose(namespace="tenant-a", spec=spec, fleet=fleet, required=False)
        if not name:
            assert isinstance(chosen, ServiceAccount)
            continue
        assert isinstance(chosen, Unnamed), chosen
        assert "not a ServiceAccount's name" in chosen.message
        assert len(chosen.message) < 400


@given(st.text(max_size=300))
def test_any_chosen_account_is_of_the_clusters_namespace(name: str) -> None:
    chosen = accounts.choose(namespace="tenant-a", spec=name, fleet=None, required=True)
    if isinstance(chosen, ServiceAccount):
        assert chosen.username == f"system:serviceaccount:tenant-a:{chosen.name}"
        assert chosen.username.count(":") == 3
        assert "\n" not in chosen.username
        assert "\r" not in chosen.username


def test_the_fleet_default_is_read_from_the_installations_spec() -> None:
    assert accounts.fleet_default(None) is None
    assert accounts.fleet_default({"spec": {}}) is None
    assert accounts.fleet_default({"spec": {"defaultServiceAccountName": 7}}) is None
    assert accounts.fleet_default({"spec": {"defaultServiceAccountName": "r"}}) == "r"


# --- why nothing was read -------------------------------------------------------------------


def test_a_refused_read_names_the_account_the_read_and_the_grant() -> None:
    said = accounts.refused(READER, accounts.NODES, exists=True)
    assert said.startswith("ServiceAccount tenant-a/reader (named in spec.serviceAccountName)")
    assert "may not list nodes in the whole cluster" in said
    assert "bind the ClusterRole ichor-tenant-reader to it" in said
    said = accounts.refused(READER, accounts.DAEMONSETS, exists=None)
    assert "may not list daemonsets.apps in the whole cluster" in said
    said = accounts.refused(READER, accounts.Read("list", "pods", namespace="shop"), exists=True)
    assert "may not list pods in namespace shop" in said
    assert "grant it list pods in namespace shop" in said


def test_a_missing_account_is_said_to_be_missing() -> None:
    said = accounts.refused(READER, accounts.NODES, exists=False)
    assert "ServiceAccount tenant-a/reader" in said
    assert "does not exist" in said
    assert "create it" in said


# --- the client -----------------------------------------------------------------------------


class Caught(Exception):
    """A request stopped before it left, with what it would have sent."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        super().__init__(url)
        self.url = url
        self.headers = headers


@pytest.fixture
async def operator() -> AsyncIterator[ApiClient]:
    """The operator's client, whose requests are caught by its REST layer."""
    configuration = client.Configuration(host="https://127.0.0.1:1")
    configuration.api_key = {"BearerToken": "Bearer operator-token"}
    api = ApiClient(configuration=configuration)

    async def request(method: str, url: str, *, headers: Any = None, **_: Any) -> Any:
        raise Caught(url, dict(headers or {}))

    api.rest_client.request = request  # type: ignore[method-assign,assignment]
    api.rest_client.pool_manager = api.rest_client._create_pool_manager()
    try:
        yield api
    finally:
        await api.close()


async def _sent(api: ApiClient) -> Caught:
    with pytest.raises(Caught) as caught:
        await client.CoreV1Api(api).list_node()
    return caught.value


async def test_every_request_carries_the_account_and_no_group(operator: ApiClient) -> None:
    acting = impersonation.impersonating(operator, READER)
    sent = await _sent(acting)
    assert sent.headers["Impersonate-User"] == "system:serviceaccount:tenant-a:reader"
    assert not [h for h in sent.headers if h.lower().startswith("impersonate-group")]
    assert sent.headers["authorization"] == "Bearer operator-token"
    assert sent.url.endswith("/api/v1/nodes")
    # the operator's own client is untouched
    assert "Impersonate-User" not in (await _sent(operator)).headers
    # the same configuration and pool: nothing of its own to open or close
    assert acting.rest_client is operator.rest_client
    await acting.close()
    assert operator.rest_client.pool_manager is not None
    assert not operator.rest_client.pool_manager.closed


async def test_the_readyz_path_call_carries_the_account_too(operator: ApiClient) -> None:
    acting = impersonation.impersonating(operator, READER)
    with pytest.raises(Caught) as caught:
        await acting.call_api(
            *await acting.param_serialize("GET", "/readyz", auth_settings=["BearerToken"])
        )
    assert caught.value.headers["Impersonate-User"] == READER.username


async def test_a_header_a_call_passes_does_not_replace_the_account(operator: ApiClient) -> None:
    acting = impersonation.impersonating(operator, READER)
    with pytest.raises(Caught) as caught:
        await acting.call_api(
            *await acting.param_serialize(
                "GET", "/api/v1/nodes", header_params={"Impersonate-User": "system:admin"},
                auth_settings=["BearerToken"],
            )
        )  # fmt: skip
    assert caught.value.headers["Impersonate-User"] == READER.username


# --- a refusal --------------------------------------------------------------------------


def _forbidden(message: str) -> errors.ApiError:
    error = ApiException(status=403, reason="Forbidden")
    error.body = json.dumps({"kind": "Status", "message": message, "code": 403})
    return errors.typed(error)


def test_a_403_inside_a_refusal_names_the_read() -> None:
    with pytest.raises(impersonation.ReadRefused) as raised, impersonation.refusal(accounts.NODES):
        raise _forbidden("nodes is forbidden")
    assert raised.value.read == accounts.NODES
    assert raised.value.status == 403
    # a refusal already named keeps its read; other errors pass as they are
    with (
        pytest.raises(impersonation.ReadRefused) as again,
        impersonation.refusal(accounts.DAEMONSETS),
        impersonation.refusal(accounts.NODES),
    ):
        raise _forbidden("nodes is forbidden")
    assert again.value.read == accounts.NODES
    with pytest.raises(errors.NotFound), impersonation.refusal(accounts.NODES):
        raise errors.typed(ApiException(status=404, reason="Not Found"))


async def test_the_message_says_the_operator_may_not_act_as_the_account(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def unknown(*_: Any) -> bool | None:
        raise AssertionError("not asked: the operator's own refusal says it all")

    monkeypatch.setattr(impersonation, "exists", unknown)
    error = impersonation.ReadRefused(
        _forbidden(
            'serviceaccounts "reader" is forbidden: User "system:serviceaccount:ichor:ichor" '
            'cannot impersonate resource "serviceaccounts" in API group "" in the namespace'
        ),
        accounts.NODES,
    )
    said = await impersonation.refused_message(None, READER, error)  # type: ignore[arg-type]
    assert "the operator may not act as ServiceAccount tenant-a/reader" in said
    assert "impersonate on serviceaccounts" in said


@pytest.mark.parametrize(("exists", "words"), [(True, "may not list nodes"),
                                               (False, "does not exist"),
                                               (None, "may not list nodes")])  # fmt: skip
async def test_the_message_is_the_operators_words_never_the_servers(
    monkeypatch: pytest.MonkeyPatch, exists: bool | None, words: str
) -> None:
    async def answer(*_: Any) -> bool | None:
        return exists

    monkeypatch.setattr(impersonation, "exists", answer)
    server = "nodes is forbidden: <script>x</script> " + "A" * 5000
    error = impersonation.ReadRefused(_forbidden(server), accounts.NODES)
    said = await impersonation.refused_message(None, READER, error)  # type: ignore[arg-type]
    assert words in said
    assert "<script>" not in said
    assert "AAAA" not in said
    assert len(said) < 300
