"""What a workload cluster sends is data, never an exception: generated Nodes, DaemonSets
and Helm release Secrets, read and turned into a status.

Every value read from a workload cluster may be of any type or size. Whatever it is, the
observation is made, a Node whose versions cannot be read is named in a short sentence,
and the status says ``NodeVersionUnreadable`` / ``CiliumVersionUnreadable``, never a
stale ``Ready=True``.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import tracemalloc
import zlib
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ichor.api.conditions import ClusterConditionType as Type
from ichor.api.conditions import ClusterReason as Reason
from ichor.api.taloscluster import TalosClusterStatus
from ichor.controller import observe
from ichor.controller.observe import Observation
from ichor.controller.taloscluster.status import Installation, evaluate
from ichor.release.versions import VersionError, parse
from tests.fixtures.fuzzing import figure, tally

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)
#: The longest sentence about one Node (its name and value are cut).
SENTENCE = 260

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
digits = st.integers(min_value=15, max_value=6_000).map(lambda n: "9" * n)
versions = st.one_of(
    st.sampled_from(["v1.14.3", "v1.36.6", "1.20.4", "v1.13.2", "", "v", "latest"]),
    st.from_regex(r"v?[0-9]{1,4}(\.[0-9]{1,4}){0,3}(-[a-z0-9.]{1,5})?", fullmatch=True),
    digits,
    digits.map(lambda d: f"v1.{d}.0"),
    digits.map(lambda d: f"v1.36.6-{d}"),
    st.text(max_size=40),
    st.text(min_size=200, max_size=400),
    json_values,
)
os_images = st.one_of(
    versions.map(lambda v: f"Talos ({v})" if isinstance(v, str) else v),
    st.sampled_from(["Talos (v1.14.3)", "Ubuntu 24.04", "Talos ()", "Talos (v1.14.3"]),
    versions,
)
names = st.one_of(st.sampled_from(["cp-1", "worker-1", ""]), st.text(max_size=300), json_values)
nodes = st.one_of(
    st.fixed_dictionaries(
        {
            "metadata": st.one_of(st.fixed_dictionaries({"name": names}), json_values),
            "status": st.one_of(
                st.fixed_dictionaries(
                    {
                        "nodeInfo": st.one_of(
                            st.fixed_dictionaries(
                                {}, optional={"osImage": os_images, "kubeletVersion": versions}
                            ),
                            json_values,
                        )
                    }
                ),
                json_values,
            ),
        }
    ),
    json_values,
)
images = st.one_of(
    versions.map(lambda v: f"quay.io/cilium/cilium:{v}" if isinstance(v, str) else v),
    st.sampled_from(["quay.io/cilium/cilium@sha256:abc", "cilium", ":", "a:b/c"]),
    versions,
)
containers = st.one_of(
    st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["cilium-agent", "init", ""]), "image": images}
            ),
            json_values,
        ),
        max_size=3,
    ),
    json_values,
)
daemonsets = st.one_of(
    st.fixed_dictionaries(
        {
            "metadata": st.one_of(
                st.fixed_dictionaries(
                    {
                        "name": st.one_of(st.sampled_from(sorted(observe.CNI_DAEMONSETS)), names),
                        "namespace": st.one_of(st.sampled_from(["kube-system", "cni"]), names),
                    }
                ),
                json_values,
            ),
            "spec": st.one_of(
                st.fixed_dictionaries(
                    {"template": st.fixed_dictionaries({"spec": st.fixed_dictionaries(
                        {"containers": containers})})}
                ),
                json_values,
            ),
        }
    ),
    json_values,
)  # fmt: skip


def _release(release: Any, *, zipped: bool) -> str:
    raw = json.dumps(release).encode()
    if zipped:
        raw = gzip.compress(raw)
    return base64.b64encode(base64.b64encode(raw)).decode()


releases = st.one_of(
    st.builds(
        _release,
        st.one_of(
            st.fixed_dictionaries(
                {"chart": st.fixed_dictionaries({"metadata": st.fixed_dictionaries(
                    {"version": versions})})}
            ),
            json_values,
        ),
        zipped=st.booleans(),
    ),
    st.text(max_size=30),
    st.binary(max_size=30).map(lambda b: base64.b64encode(b).decode()),
    json_values,
)  # fmt: skip
secrets = st.one_of(
    st.fixed_dictionaries(
        {"metadata": st.fixed_dictionaries({"name": names}), "data": st.one_of(
            st.fixed_dictionaries({"release": releases}), json_values)}
    ),
    json_values,
)  # fmt: skip


def readable(value: Any) -> bool:
    if not isinstance(value, str) or len(value) > observe.MAX_VERSION_TEXT:
        return False
    try:
        parse(value)
    except VersionError:
        return False
    return True


def status_of(observation: Observation) -> dict[str, tuple[str, str]]:
    outcome = evaluate(
        spec={
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "versionContract": "v1.14",
            "cni": {"preset": "cilium"},
        },
        generation=1,
        previous=TalosClusterStatus(),
        observation=observation,
        failure=None,
        installation=Installation(present=False, targets=None),
        now=NOW,
    )
    return {c.type: (c.status.value, c.reason) for c in outcome.status.conditions}


FIVE_THOUSAND_DIGITS = {
    "metadata": {"name": "cp-1"},
    "status": {"nodeInfo": {"osImage": "Talos (v1.14.3)", "kubeletVersion": "v1." + "9" * 5_000}},
}


@FUZZ
@example(items=[FIVE_THOUSAND_DIGITS])
@example(items=[{"status": {"nodeInfo": {"osImage": "Talos (v1." + "9" * 5_000 + ".0)"}}}])
@given(items=st.lists(nodes, max_size=14))
def test_any_node_list_gives_an_observation_and_unreadable_nodes_are_named(
    items: list[Any],
) -> None:
    with tally("observe: Nodes"):
        seen = observe.nodes_observation(items)
        assert seen.count == len(items)
        bad = 0
        for item in items:
            info = {}
            if isinstance(item, dict) and isinstance(item.get("status"), dict):
                found = item["status"].get("nodeInfo")
                info = found if isinstance(found, dict) else {}
            image = info.get("osImage")
            talos = (
                re.fullmatch(r"Talos \(([^()\s]+)\)", image)
                if isinstance(image, str) and len(image) <= observe.MAX_VERSION_TEXT
                else None
            )
            bad += talos is None or not readable(talos[1])
            bad += not readable(info.get("kubeletVersion"))
        assert len(seen.unreadable) == min(bad, observe.MAX_NAMED + (bad > observe.MAX_NAMED))
        assert all(len(sentence) <= SENTENCE for sentence in seen.unreadable)
        conditions = status_of(Observation(nodes=seen, cni=observe.CNIObservation(None, None)))
        if bad:
            assert conditions[Type.READY] == ("False", Reason.NODE_VERSION_UNREADABLE)
        elif items:
            assert conditions[Type.READY][0] == "True"


@FUZZ
@example(
    items=[
        {
            "metadata": {"name": "cilium", "namespace": "kube-system"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "cilium-agent", "image": "quay.io/cilium/cilium:v1." + "9" * 5_000}]}}},
        }
    ],
    helm=[],
)  # fmt: skip
@given(items=st.lists(daemonsets, max_size=4), helm=st.lists(secrets, max_size=3))
def test_any_daemonset_and_helm_release_gives_a_cni_observation(
    items: list[Any], helm: list[Any]
) -> None:
    with tally("observe: DaemonSets and Helm releases"):
        seen = observe.cni_observation(items, helm)
        assert seen.detected is None or seen.detected in observe.CNI_DAEMONSETS.values()
        if seen.version is not None:
            assert readable(seen.version)
            assert not seen.version.startswith("v")
        assert observe.cilium_namespace(items)
        nodes_seen = observe.nodes_observation([])
        ok = observe.NodesObservation(1, ("v1.14.3",), ("v1.36.6",), ())
        conditions = status_of(Observation(nodes=ok, cni=seen))
        if seen.detected == "cilium" and seen.version is None:
            assert conditions[Type.CILIUM_UPGRADE_AVAILABLE][1] == Reason.CILIUM_VERSION_UNREADABLE
        assert nodes_seen.count == 0


def test_a_helm_release_that_inflates_past_the_limit_is_not_read() -> None:
    bomb = gzip.compress(b'{"chart": {"metadata": {"version": "1.20.4"}}, "pad": "' + b"0" * (
        observe.MAX_RELEASE_BYTES + 10) + b'"}')  # fmt: skip
    secret = {"data": {"release": base64.b64encode(base64.b64encode(bomb)).decode()}}
    assert len(bomb) < 100_000
    assert observe.helm_chart_version(secret) is None


def test_a_node_list_that_is_not_a_list_is_unreadable_not_empty() -> None:
    seen = observe.unreadable_nodes("the answer is not a JSON object with a list of items")
    conditions = status_of(Observation(nodes=seen, cni=observe.CNIObservation(None, None)))
    assert conditions[Type.READY] == ("False", Reason.NODE_VERSION_UNREADABLE)


@pytest.mark.parametrize(
    ("payload", "items"),
    [({"items": []}, []), ({"items": {}}, None), ([], None), (None, None), ("x", None)],
)
def test_only_a_list_response_has_items(payload: Any, items: list[Any] | None) -> None:
    assert observe._items(payload) == items


# --- bombs and shapes: what a hostile workload cluster can put in a Helm release ----------


def _bomb(inflated: bytes) -> dict[str, Any]:
    """A Helm release Secret whose release inflates to ``inflated``: gzip at its best
    ratio, so the Secret stays small."""
    packed = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    raw = packed.compress(inflated) + packed.flush()
    return {
        "metadata": {"name": "sh.helm.release.v1.cilium.v1"},
        "data": {"release": base64.b64encode(base64.b64encode(raw)).decode()},
    }


#: Sixteen MiB of ``[{},{},...]``: about 5.6 million JSON values in a Secret of 29 KiB.
EMPTY_OBJECTS = b"[" + b",".join([b"{}"] * (16 * 1024 * 1024 // 3)) + b"]"


def _peak_while(call: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_release_that_inflates_to_millions_of_values_is_not_parsed() -> None:
    secret = _bomb(EMPTY_OBJECTS)
    assert len(secret["data"]["release"]) < 64 * 1024
    version, peak = _peak_while(lambda: observe.helm_chart_version(secret))
    figure(
        f"observe: a {len(secret['data']['release']) / 1024:.0f} KiB Helm release Secret "
        f"inflating to {len(EMPTY_OBJECTS) / 2**20:.0f} MiB of empty objects: peak "
        f"{peak / 2**20:.1f} MiB while it is read"
    )
    assert version is None
    assert peak < 24 * 2**20, f"reading it took {peak / 2**20:.0f} MiB"


def test_a_release_just_within_the_bytes_but_of_millions_of_values_is_not_parsed() -> None:
    inflated = b"[" + b",".join([b"{}"] * (observe.MAX_RELEASE_BYTES // 3 - 1)) + b"]"
    assert len(inflated) <= observe.MAX_RELEASE_BYTES
    version, peak = _peak_while(lambda: observe.helm_chart_version(_bomb(inflated)))
    figure(
        f"observe: a Helm release inflating to {len(inflated) / 2**20:.1f} MiB of empty "
        f"objects (within the bytes, not the values): peak {peak / 2**20:.1f} MiB"
    )
    assert version is None
    assert peak < 3 * observe.MAX_RELEASE_BYTES


def test_a_release_nested_deeper_than_python_recurses_is_not_read() -> None:
    deep = (
        b'{"chart": {"metadata": {"version": "1.20.4"}}, "x": '
        + b"[" * 200_000
        + b"]" * 200_000
        + b"}"
    )
    assert observe.helm_chart_version(_bomb(deep)) is None


def test_a_real_sized_release_is_still_read() -> None:
    """A Cilium release holds its chart's templates and values: a few MiB and tens of
    thousands of values, well within the bounds."""
    values = {f"key{i}": {"enabled": i % 2 == 0, "list": [i, str(i)]} for i in range(8_000)}
    templates = [{"name": f"templates/t{i}.yaml", "data": "eA==" * 2_000} for i in range(150)]
    release = {
        "name": "cilium",
        "chart": {"metadata": {"version": "1.20.4"}, "templates": templates, "values": values},
        "manifest": "---\n" * 100_000,
    }
    assert observe.helm_chart_version(_bomb(json.dumps(release).encode())) == "1.20.4"


shapes = st.one_of(
    st.integers(min_value=1, max_value=200_000).map(lambda n: b"[" * n + b"]" * n),
    st.integers(min_value=1, max_value=200_000).map(lambda n: b'{"a":' * n + b"1" + b"}" * n),
    st.integers(min_value=1, max_value=2_000_000).map(
        lambda n: b"[" + b",".join([b"{}"] * n) + b"]"
    ),
    st.integers(min_value=1, max_value=2_000_000).map(lambda n: b"[" + b"0," * n + b"0]"),
    st.integers(min_value=1, max_value=4_000_000).map(lambda n: b'"' + b"a" * n + b'"'),
    st.binary(max_size=64),
)


@settings(FUZZ, max_examples=60)
@given(inflated=shapes, wrap=st.booleans())
def test_any_deep_or_large_release_gives_a_version_or_none(inflated: bytes, wrap: bool) -> None:
    with tally("observe: deep and large Helm releases (gzip bombs)"):
        if wrap:
            inflated = b'{"chart": {"metadata": {"version": "1.20.4"}}, "x": ' + inflated + b"}"
        version = observe.helm_chart_version(_bomb(inflated))
        assert version is None or version == "1.20.4"
        seen = observe.cni_observation(
            [{"metadata": {"name": "cilium", "namespace": "kube-system"}}], [_bomb(inflated)]
        )
        assert seen.detected == "cilium"
        if seen.version is None:
            ok = observe.NodesObservation(1, ("v1.14.3",), ("v1.36.6",), ())
            conditions = status_of(Observation(nodes=ok, cni=seen))
            assert conditions[Type.CILIUM_UPGRADE_AVAILABLE][1] == Reason.CILIUM_VERSION_UNREADABLE


class _Stream:
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def readany(self) -> bytes:
        chunk, self.body = self.body[: 1 << 20], self.body[1 << 20 :]
        return chunk


class _Response:
    def __init__(self, body: bytes) -> None:
        self.content = _Stream(body)
        self.content_length = None
        self.status = 200
        self.reason = "OK"

    def release(self) -> None:
        pass


@settings(FUZZ, max_examples=60)
@given(shape=shapes, wrap=st.booleans())
def test_any_deep_or_large_list_answer_gives_nodes_or_an_unreadable_list(
    shape: bytes, wrap: bool
) -> None:
    """A workload cluster's Node list of any shape and size: read within the reconciler's
    bounds, or unreadable, and then named so in the status; never an exception."""
    import asyncio

    from ichor.controller.taloscluster import reconciler

    async def method(*_: Any, **__: Any) -> _Response:
        return _Response(b'{"items": ' + shape + b"}" if wrap else shape)

    with tally("observe: deep and large Node list answers"):
        payload = asyncio.run(reconciler._get_json(method))
        items = observe._items(payload)
        if items is None:
            seen = observe.unreadable_nodes("the answer is not a JSON object with a list of items")
        else:
            seen = observe.nodes_observation(items)
        conditions = status_of(Observation(nodes=seen, cni=observe.CNIObservation(None, None)))
        if items is None or seen.unreadable:
            assert conditions[Type.READY] == ("False", Reason.NODE_VERSION_UNREADABLE)
