"""Kubeconfigs and talosconfigs as a user stores them in a Secret: a good one with inline
credentials (a throwaway CA and client), and the hostile variants the tests change it
into. Plain dicts, dumped with ``text()`` (never with anchors)."""

from __future__ import annotations

import base64
import copy
from functools import cache
from typing import Any

import yaml

from tests.harness import certs


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@cache
def authority() -> certs.Authority:
    return certs.Authority.create("credentials-test-ca")


@cache
def client() -> certs.Pem:
    return authority().issue_client(user="tenant", groups=("tenants",))


def kubeconfig(
    server: str = "https://127.0.0.1:6443",
    *,
    token: str | None = None,
    ca: bytes | None = None,
    client_pem: certs.Pem | None = None,
    cert: bool = True,
) -> dict[str, Any]:
    """One cluster, one user, one context; the client certificate unless ``cert`` is off."""
    user: dict[str, Any] = {}
    if token is not None:
        user["token"] = token
    if cert:
        pem = client_pem or client()
        user["client-certificate-data"] = b64(pem.cert)
        user["client-key-data"] = b64(pem.key)
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "workload",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": b64(ca or authority().cert_pem),
                },
            }
        ],
        "users": [{"name": "tenant", "user": user}],
        "contexts": [{"name": "workload", "context": {"cluster": "workload", "user": "tenant"}}],
        "current-context": "workload",
    }


@cache
def talos_client() -> certs.Pem:
    """A Talos client certificate: its role is its Organization (os:admin can upgrade)."""
    return authority().issue_client(user="tenant", groups=("os:admin",))


def talosconfig(endpoint: str = "10.5.0.2:50000") -> dict[str, Any]:
    pem = talos_client()
    return {
        "context": "prod",
        "contexts": {
            "prod": {
                "endpoints": [endpoint],
                "nodes": [endpoint.split(":")[0]],
                "ca": b64(authority().cert_pem),
                "crt": b64(pem.cert),
                "key": b64(pem.key),
            }
        },
    }


def with_user(config: dict[str, Any], **fields: Any) -> dict[str, Any]:
    changed = copy.deepcopy(config)
    changed["users"][0]["user"].update(fields)
    return changed


def with_cluster(config: dict[str, Any], **fields: Any) -> dict[str, Any]:
    changed = copy.deepcopy(config)
    changed["clusters"][0]["cluster"].update(fields)
    return changed


def exec_user(command: str) -> dict[str, Any]:
    """A user whose credential comes from running ``/bin/sh -c command``."""
    return {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "/bin/sh",
            "args": ["-c", command],
            "interactiveMode": "Never",
        }
    }


def text(config: object) -> str:
    """YAML without anchors, whatever objects ``config`` shares."""

    class Plain(yaml.SafeDumper):
        def ignore_aliases(self, data: object) -> bool:
            return True

    return yaml.dump(config, Dumper=Plain, sort_keys=False)
