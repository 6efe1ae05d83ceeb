"""Reading versions from Nodes, DaemonSets and Helm release Secrets."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

from ichor.controller.observe import (
    cni_observation,
    helm_chart_version,
    image_version,
    nodes_observation,
)
from ichor.kube.payloads import DaemonSet, Node, Secret


def node(name: str, os_image: str, kubelet: str) -> Node:
    return {
        "metadata": {"name": name},
        "status": {"nodeInfo": {"osImage": os_image, "kubeletVersion": kubelet}},
    }


def daemonset(name: str, image: str, namespace: str = "kube-system") -> DaemonSet:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"template": {"spec": {"containers": [{"name": "cilium-agent", "image": image}]}}},
    }


def test_nodes_report_distinct_versions_lowest_first() -> None:
    seen = nodes_observation(
        [
            node("a", "Talos (v1.14.3)", "v1.36.6"),
            node("b", "Talos (v1.13.2)", "v1.36.6"),
            node("c", "Talos (v1.14.3)", "v1.35.2"),
        ]
    )
    assert seen.talos_versions == ("v1.13.2", "v1.14.3")
    assert seen.kubernetes_versions == ("v1.35.2", "v1.36.6")
    assert (seen.talos, seen.kubernetes, seen.differ, seen.count) == (
        "v1.13.2",
        "v1.35.2",
        True,
        3,
    )


@pytest.mark.parametrize(
    ("os_image", "kubelet"),
    [("Ubuntu 24.04", "v1.36.6"), ("Talos (vbanana)", "v1.36.6"), ("Talos (v1.14.3)", "")],
)
def test_an_unreadable_node_is_named_not_guessed(os_image: str, kubelet: str) -> None:
    seen = nodes_observation([node("odd", os_image, kubelet)])
    assert len(seen.unreadable) == 1
    assert "odd" in seen.unreadable[0]


@pytest.mark.parametrize(
    ("image", "version"),
    [
        ("quay.io/cilium/cilium:v1.20.4", "1.20.4"),
        ("quay.io/cilium/cilium:v1.20.4@sha256:abc", "1.20.4"),
        ("localhost:5000/cilium:1.19.3", "1.19.3"),
        ("quay.io/cilium/cilium@sha256:abc", None),
        ("localhost:5000/cilium", None),
        ("quay.io/cilium/cilium:latest", None),
    ],
)
def test_image_version_reads_the_tag(image: str, version: str | None) -> None:
    assert image_version(image) == version


def helm_release(version: str) -> Secret:
    release = json.dumps({"chart": {"metadata": {"name": "cilium", "version": version}}})
    payload = base64.b64encode(gzip.compress(release.encode())).decode()
    return {
        "metadata": {"name": "sh.helm.release.v1.cilium.v3"},
        "data": {"release": base64.b64encode(payload.encode()).decode()},
    }


def test_the_helm_release_gives_the_chart_when_the_image_has_no_tag() -> None:
    assert helm_chart_version(helm_release("1.20.4")) == "1.20.4"
    seen = cni_observation(
        [daemonset("cilium", "quay.io/cilium/cilium@sha256:abc")], [helm_release("1.20.4")]
    )
    assert (seen.detected, seen.version) == ("cilium", "1.20.4")


@pytest.mark.parametrize(
    ("daemonsets", "detected", "version"),
    [
        ([], None, None),
        ([daemonset("kube-flannel", "ghcr.io/siderolabs/flannel:v0.26.4")], "flannel", "0.26.4"),
        (
            [
                daemonset("kube-flannel", "ghcr.io/siderolabs/flannel:v0.26.4"),
                daemonset("cilium", "quay.io/cilium/cilium:v1.20.4"),
            ],
            "cilium",
            "1.20.4",
        ),
        ([daemonset("unrelated", "example.com/agent:v1.0.0")], None, None),
    ],
)
def test_the_cni_is_recognised_by_its_daemonset(
    daemonsets: list[DaemonSet], detected: str | None, version: str | None
) -> None:
    seen = cni_observation(daemonsets)
    assert (seen.detected, seen.version) == (detected, version)


DIGEST = "quay.io/cilium/cilium@sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("image", "releases", "said"),
    [
        (
            DIGEST,
            [],
            "the image is pinned by digest only and no deployed Helm release names its chart",
        ),
        (
            "quay.io/cilium/cilium:stable@sha256:" + "cd" * 32,
            [],
            "the image's tag is not a release and no deployed Helm release names its chart",
        ),
        (
            "quay.io/cilium/cilium",
            [{"data": {"release": "not base64!"}}],
            "the image carries no tag and its deployed Helm release names no chart version "
            "that can be read",
        ),
        ("", [], "its agent container names no image and no deployed Helm release names its chart"),
    ],
)
def test_a_cilium_whose_release_cannot_be_read_says_why_in_its_own_words(
    image: str, releases: list[object], said: str
) -> None:
    seen = cni_observation([daemonset("cilium", image)], releases)
    assert (seen.detected, seen.version) == ("cilium", None)
    assert seen.unreadable == (
        f"Cilium is running (DaemonSet kube-system/cilium) but its release cannot be read: {said}"
    )


def test_the_unreadable_sentence_quotes_nothing_the_cluster_sent_but_a_dns_name() -> None:
    hostile = daemonset("cilium", "quay.io/cilium/cilium@sha256:" + "x" * 5000, namespace="A" * 300)
    seen = cni_observation([hostile])
    assert seen.unreadable is not None
    assert "AAAA" not in seen.unreadable
    assert "xxxx" not in seen.unreadable
    assert "(a name that is not a DNS name)" in seen.unreadable
    assert len(seen.unreadable) < 200
    # A readable release, or another CNI, has no such sentence.
    assert (
        cni_observation([daemonset("cilium", "quay.io/cilium/cilium:v1.20.4")]).unreadable is None
    )
    flannel = cni_observation([daemonset("kube-flannel", DIGEST)])
    assert (flannel.detected, flannel.version, flannel.unreadable) == ("flannel", None, None)
