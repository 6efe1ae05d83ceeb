"""TalosCluster writes through the real API server: refused, overridden, and recorded."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.component.webhook import harness
from tests.component.webhook.conftest import HOLDER, PLAIN, Api
from tests.support import table

pytestmark = pytest.mark.component

NAME = "prod"
VERB_WORDS = "the RBAC verb `override` on `talosclusters` in API group `ichor.dev`"


@dataclass(frozen=True)
class Case:
    """A write to refuse: a create (no base) or a spec patch of a stored cluster."""

    spec: dict[str, Any]
    overridable: bool
    words: str
    base: dict[str, str] | None = None
    cilium: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def prepare(self, api: Api) -> None:
        if self.base is None:
            return
        created = api.create(harness.cluster_manifest(NAME, api.namespace, **self.base), user=None)
        assert created.returncode == 0, created.stderr
        if self.cilium is not None:
            api.set_cilium(NAME, self.cilium)

    def write(
        self, api: Api, *, user: str, dry_run: bool = False, groups: Sequence[str] = ()
    ) -> Any:
        if self.base is None:
            body = harness.cluster_manifest(NAME, api.namespace)
            body["spec"].update(self.spec)
            return api.create(body, user=user, dry_run=dry_run, groups=groups)
        return api.patch_spec(NAME, self.spec, user=user, dry_run=dry_run, groups=groups)


CASES = {
    "kubernetes-1.31.9-with-talos-1.14": Case(
        spec={"kubernetesVersion": "v1.31.9"},
        overridable=True,
        words="Talos 1.14 runs Kubernetes 1.33 to 1.37",
    ),
    "kubernetes-1.32.0-with-talos-1.14": Case(
        spec={"kubernetesVersion": "v1.32.0"},
        overridable=True,
        words="Kubernetes v1.32.0 is refused with Talos v1.14.3",
    ),
    "downgrade": Case(
        base={},
        spec={"kubernetesVersion": "v1.36.5"},
        overridable=False,
        words="no downgrade",
    ),
    # The CRD's schema refuses this before the webhook is called; the user reads the form.
    "malformed-version": Case(
        base={},
        spec={"kubernetesVersion": "1.36.7"},
        overridable=False,
        words="expected the full form vX.Y.Z",
    ),
    "unknown-talos": Case(
        base={},
        spec={"talosVersion": table.unknown_talos()},
        overridable=False,
        words=(
            f"Talos {table.unknown_talos()} is refused: this Ichor knows Talos {table.KNOWN_TALOS}"
        ),
    ),
    "cilium-order": Case(
        base={"kubernetes": "v1.35.4"},
        cilium="1.19.10",
        spec={"kubernetesVersion": "v1.36.6"},
        overridable=True,
        words="upgrade Cilium to 1.20.4 first, the chart this Ichor embeds",
    ),
    # The preset decides whether the Cilium table holds the cluster: releasing an
    # observed Cilium from it needs the verb, so no flip, step, flip back goes around it.
    "release-an-observed-cilium": Case(
        base={},
        cilium="1.20.4",
        spec={"cni": {"preset": "unmanaged"}},
        overridable=True,
        words="spec.cni.preset from cilium to unmanaged is refused while Cilium 1.20.4 runs",
    ),
    "release-and-move-kubernetes-in-one-update": Case(
        base={},
        cilium="1.20.4",
        spec={"cni": {"preset": "unmanaged"}, "kubernetesVersion": "v1.37.1"},
        overridable=True,
        words="spec.cni.preset from cilium to unmanaged is refused while Cilium 1.20.4 runs",
    ),
    "release-an-unknown-cilium": Case(
        base={},
        cilium=table.unknown_cilium(),
        spec={"cni": {"preset": "unmanaged"}},
        overridable=False,
        words=f"Cilium {table.unknown_cilium()} is refused",
    ),
}
OVERRIDABLE = {name: case for name, case in CASES.items() if case.overridable}
NEVER = {name: case for name, case in CASES.items() if not case.overridable}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_user_without_the_verb_is_refused_and_nothing_changes(api: Api, case: Case) -> None:
    case.prepare(api)
    before = api.cluster(NAME)
    result = case.write(api, user=PLAIN)
    assert result.returncode != 0
    assert case.words in result.stderr
    if case.overridable:
        assert VERB_WORDS in result.stderr
        assert f"user '{PLAIN}' does not" in result.stderr
    after = api.cluster(NAME)
    assert (after or {}).get("spec") == (before or {}).get("spec")
    assert api.override_events(NAME) == []


HOLDERS = {
    "bound-to-the-override-role": (HOLDER, ()),
    "cluster-admin": ("root", ("system:masters",)),
}


@pytest.mark.parametrize(("user", "groups"), HOLDERS.values(), ids=HOLDERS.keys())
@pytest.mark.parametrize("case", OVERRIDABLE.values(), ids=OVERRIDABLE.keys())
def test_the_holder_passes_a_compatibility_refusal_and_it_is_recorded(
    api: Api, case: Case, user: str, groups: tuple[str, ...]
) -> None:
    case.prepare(api)
    dry = case.write(api, user=user, groups=groups, dry_run=True)
    assert dry.returncode == 0, dry.stderr
    assert f"Warning: override by {user}" in dry.stderr
    assert api.override_events(NAME) == [], "a dry run records nothing"

    done = case.write(api, user=user, groups=groups)
    assert done.returncode == 0, done.stderr
    assert f"Warning: override by {user}" in done.stderr
    (event,) = api.override_events(NAME)
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "TalosCluster"
    assert f"User {user} overrode" in event["message"]
    assert case.words in event["message"]
    stored = api.cluster(NAME)
    assert stored is not None
    for key, value in case.spec.items():
        assert stored["spec"][key] == value


@pytest.mark.parametrize("case", NEVER.values(), ids=NEVER.keys())
def test_the_holder_cannot_pass_a_refusal_that_is_never_overridable(api: Api, case: Case) -> None:
    case.prepare(api)
    result = case.write(api, user=HOLDER)
    assert result.returncode != 0
    assert case.words in result.stderr
    assert api.override_events(NAME) == []


def test_a_compatible_upgrade_passes_without_warning_or_record(api: Api) -> None:
    Case(base={}, spec={}, overridable=False, words="").prepare(api)
    result = api.patch_spec(NAME, {"kubernetesVersion": "v1.36.7"}, user=PLAIN)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr
    assert api.override_events(NAME) == []


def test_an_edit_that_leaves_an_incompatible_pair_alone_is_not_blocked(api: Api) -> None:
    """A cluster that runs an incompatible pair is not blocked from other edits
    (docs/design/decisions.md)."""
    created = api.create(
        harness.cluster_manifest(NAME, api.namespace, kubernetes="v1.31.9"), user=None
    )
    assert created.returncode == 0, created.stderr
    result = api.plane.kubectl(
        "label", "taloscluster", NAME, "-n", api.namespace, "team=a", as_user=PLAIN, check=False
    )
    assert result.returncode == 0, result.stderr


UNKNOWN_CILIUM = f"Cilium {table.unknown_cilium()} is refused"


@pytest.mark.parametrize(("user", "groups"), HOLDERS.values(), ids=HOLDERS.keys())
def test_an_unknown_cilium_behind_an_overridable_pair_is_refused_for_the_holder(
    api: Api, user: str, groups: tuple[str, ...]
) -> None:
    """Talos v1.14.3 and Kubernetes v1.31.5 (stored under override), an unknown Cilium seen:
    moving Kubernetes to v1.32.0 is a pair refusal the verb passes, but no override
    passes a Cilium this build does not know, so the holder is refused too."""
    stored = api.create(
        harness.cluster_manifest(NAME, api.namespace, kubernetes="v1.31.5"), user=None
    )
    assert stored.returncode == 0, stored.stderr
    api.set_cilium(NAME, table.unknown_cilium())
    before = api.cluster(NAME)
    events = len(api.override_events(NAME))
    for dry_run in (True, False):
        result = api.patch_spec(
            NAME, {"kubernetesVersion": "v1.32.0"}, user=user, groups=groups, dry_run=dry_run
        )
        assert result.returncode != 0, result.stdout
        assert UNKNOWN_CILIUM in result.stderr
        assert "no override passes an unknown version" in result.stderr
    after = api.cluster(NAME)
    assert after is not None
    assert before is not None
    assert after["spec"] == before["spec"]
    assert len(api.override_events(NAME)) == events


def test_an_unmanaged_cni_is_not_held_to_the_cilium_table(api: Api) -> None:
    """spec.cni.preset unmanaged with a detected Cilium 1.20.4: Kubernetes v1.37.1 (which
    Cilium 1.20 does not run) passes for a user without the verb, with no warning."""
    body = harness.cluster_manifest(NAME, api.namespace)
    body["spec"]["cni"] = {"preset": "unmanaged"}
    assert api.create(body, user=None).returncode == 0
    api.set_cilium(NAME, "1.20.4")
    result = api.patch_spec(NAME, {"kubernetesVersion": "v1.37.1"}, user=PLAIN)
    assert result.returncode == 0, result.stderr
    assert "Warning" not in result.stderr
    assert api.override_events(NAME) == []
    # not held, but not silent: the step the rule would refuse is recorded, naming the user
    listed = api.plane.kubectl(
        "get", "events", "-n", api.namespace, "-o", "json",
        f"--field-selector=involvedObject.name={NAME},reason=CiliumRuleSkipped",
    )  # fmt: skip
    (event,) = json.loads(listed.stdout)["items"]
    assert event["type"] == "Warning"
    assert f"User {PLAIN} wrote TalosCluster {api.namespace}/{NAME}" in event["message"]
    assert "Cilium 1.20.4 runs Kubernetes 1.33 to 1.36" in event["message"]
