"""No path lets the override verb pass what a never-overridable rule refuses.

For generated clusters, targets and observations, each path's rules are asked one by one
(the public single rules: the form and final checks, newer, the Talos path, the
Kubernetes skew and pairing, the Talos and Cilium pairs), independently of how the path
composes them. Whenever any single rule answers UnknownVersion, or another rule that no
override passes, the verdict of every path must be non-overridable; when the single rules
only refuse what the verb passes, the path is overridable; when none refuses, it is clean.
A Cilium seen whose release cannot be read (detected, no version) is, to this oracle, a
rule that no override passes wherever the Cilium half would be asked (``cilium_answer``).

The paths: the webhook's TalosCluster write and TalosOperation plan, the executor (spec
and observed versions), adopt, init, the choices, the blocked-release lines, the path
plans and the ``VersionsCompatible`` condition.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from ichor.api.conditions import ClusterConditionType, ClusterReason
from ichor.api.ichorinstallation import UpgradeTargets
from ichor.api.taloscluster import TalosClusterStatus
from ichor.api.talosoperation import OperationType
from ichor.controller.observe import CNIObservation, NodesObservation, Observation
from ichor.controller.taloscluster import status
from ichor.controller.talosoperation import lifecycle
from ichor.release import compat, steps
from ichor.release.observed import Unreadable
from ichor.release.refusals import Refusal, Rule, Verdict
from ichor.release.release_set import (
    ADOPT_MIN_TALOS,
    PINNED,
    ReleaseSet,
    check_adopt_compat,
    check_init_compat,
)
from ichor.release.versions import VersionError, check_final, parse
from ichor.upgrade import blocked, path_plan, paths
from ichor.upgrade import choices as upgrade_choices
from ichor.upgrade.rule import ClusterVersions, Component, check_target
from ichor.webhook import decisions
from ichor.webhook.reviews import ClusterObject, NamespacedName, OperationSpec, Requester
from tests.fixtures.fuzzing import figure
from tests.support import table

EXAMPLES = 400
pure = settings(
    database=None,
    deadline=None,
    max_examples=EXAMPLES,
    suppress_health_check=[HealthCheck.too_slow],
)


class Class(Enum):
    """How a set of answers stands: what the override verb can do about it."""

    CLEAN = "clean"
    OVERRIDABLE = "overridable"
    NEVER = "never"


#: Per path: examples judged, and how many were the case the properties are for.
EXAMPLES_SEEN: Counter[str] = Counter()
LAYERED_SEEN: Counter[str] = Counter()
LAYERED = "never-overridable behind an overridable refusal"


def classify(answers: list[Refusal | None], *, path: str | None = None) -> Class:
    """How the single rules' answers stand together; ``path`` counts the example for the
    share of the case that matters printed at the end of the run."""
    found = [answer for answer in answers if answer is not None]
    never = [refusal for refusal in found if not refusal.overridable]
    layered = bool(never) and found.index(never[0]) > 0
    if path is not None:
        EXAMPLES_SEEN[path] += 1
        LAYERED_SEEN[path] += layered
    if never:
        # The case the properties are for: an overridable refusal first, one behind it
        # that no override passes (counted in --hypothesis-show-statistics, and printed).
        if layered:
            event(LAYERED)
        return Class.NEVER
    return Class.OVERRIDABLE if found else Class.CLEAN


@pytest.fixture(scope="module", autouse=True)
def _shares() -> Iterator[None]:
    """After the module: the share of the case that matters, per path."""
    yield
    shares = ", ".join(
        f"{path} {LAYERED_SEEN[path] / seen:.1%} ({LAYERED_SEEN[path]:,} of {seen:,})"
        for path, seen in sorted(EXAMPLES_SEEN.items())
    )
    if shares:
        figure(f"never-overridable properties, share of '{LAYERED}': {shares}")


def of(refusal: Refusal | None) -> Class:
    return classify([refusal])


# --- generated clusters -------------------------------------------------------------------

# Minors around what this build knows, up to two past the newest of each (unknown), and
# Cilium 1.16/1.17 below the table (unknown too).
talos_tag = st.builds(
    lambda minor, patch: f"v1.{minor}.{patch}",
    st.integers(10, table.UNKNOWN_TALOS_MINOR[1] + 1),
    st.integers(0, 6),
)
kubernetes_tag = st.builds(
    lambda minor, patch: f"v1.{minor}.{patch}",
    st.integers(28, table.UNKNOWN_KUBERNETES_MINOR[1] + 1),
    st.integers(0, 9),
)
some_cilium = st.one_of(
    st.builds(
        lambda minor, patch: f"1.{minor}.{patch}",
        st.integers(16, table.UNKNOWN_CILIUM_MINOR[1] + 1),
        st.integers(0, 12),
    ),
    st.sampled_from(["unknown", "v1.20.4", "1.20"]),
)
cilium_release = st.one_of(st.none(), some_cilium, some_cilium)
detected_cni = st.sampled_from(
    [None, "cilium", "cilium", "cilium", "Cilium", " cilium ", "flannel", "calico"]
)


def _tag(version: tuple[int, int, int]) -> str:
    return "v{}.{}.{}".format(*version)


@st.composite
def target_near(draw: st.DrawFn, running: str) -> str:
    """A target near what runs (same or next minor: past the path and skew rules, where
    the pairs decide), or anywhere; sometimes a pre-release or the shorthand."""
    major, minor, patch = parse(running).core
    near = st.one_of(
        st.builds(lambda p: _tag((major, minor, p)), st.integers(patch + 1, patch + 4)),
        st.builds(lambda p: _tag((major, minor + 1, p)), st.integers(0, 9)),
    )
    anywhere = st.one_of(talos_tag, kubernetes_tag)
    tag = draw(st.one_of(near, near, near, anywhere))
    return draw(st.sampled_from([tag] * 6 + [tag + "-rc.0", tag.rsplit(".", 1)[0]]))


@dataclass(frozen=True)
class Scene:
    cluster: ClusterVersions
    component: Component
    target: str
    observed_talos: str | None
    observed_kubernetes: str | None


@st.composite
def scenes(draw: st.DrawFn) -> Scene:
    detected = draw(detected_cni)
    cilium = draw(cilium_release)
    preset = draw(st.sampled_from(["cilium", "cilium", "unmanaged"]))
    cluster = ClusterVersions(
        talos=draw(talos_tag),
        kubernetes=draw(kubernetes_tag),
        cilium=steps.cilium_release(preset=preset, detected=detected, version=cilium),
        cni=detected,
        preset=preset,
    )
    component = draw(st.sampled_from([Component.TALOS, Component.KUBERNETES]))
    return Scene(
        cluster=cluster,
        component=component,
        target=draw(
            target_near(cluster.talos if component is Component.TALOS else cluster.kubernetes)
        ),
        observed_talos=draw(st.one_of(st.none(), talos_tag)),
        observed_kubernetes=draw(st.one_of(st.none(), kubernetes_tag)),
    )


#: Minors this build does not know: behind an overridable pair, no override passes them.
_UNKNOWN_CILIUM = table.UNKNOWN_CILIUM_MINOR[1]
unknown_cilium = st.one_of(
    st.builds(lambda minor, patch: f"1.{minor}.{patch}",
              st.sampled_from([16, 17, _UNKNOWN_CILIUM, _UNKNOWN_CILIUM + 1]), st.integers(0, 12)),
    st.just("unknown"),
)  # fmt: skip


@st.composite
def layered_scenes(draw: st.DrawFn) -> Scene:
    """The case that matters, built on purpose: an overridable refusal first and one no
    override passes behind it.

    Mostly Kubernetes (every path reads it): Talos 1.14 with a target one step up that
    its pair refuses (Talos 1.14 runs 1.33 to 1.37: within 1.31, 1.31 to 1.32, within
    1.32), and behind it a Cilium minor this build does not know (now and then Cilium
    1.20.4, which refuses too but overridably); for the executor, sometimes Nodes on a
    Kubernetes the target is more than one minor above. Else Talos: a target whose pair
    with the spec's Kubernetes is refused, with Nodes on a Talos the path does not lead
    from (1.9 to 1.11), which only the executor reads.
    """
    detected = draw(st.sampled_from(["cilium", "Cilium", " cilium "]))
    if draw(st.sampled_from([True] * 4 + [False])):  # the webhook's paths read this one
        talos = draw(st.builds(lambda p: f"v1.14.{p}", st.integers(0, 6)))
        kubernetes = draw(st.sampled_from(["v1.31.2", "v1.31.5", "v1.32.0", "v1.32.3"]))
        # None: Cilium seen, its release unreadable (the digest-only image)
        cilium = draw(st.one_of(*[unknown_cilium] * 5, st.just("1.20.4"), st.none()))
        observed_kubernetes = draw(st.one_of(st.none(), st.sampled_from(["v1.29.4", "v1.30.1"])))
        cluster = ClusterVersions(
            talos=talos,
            kubernetes=kubernetes,
            cilium=steps.cilium_release(preset="cilium", detected=detected, version=cilium),
            cni=detected,
        )
        major, minor, patch = parse(kubernetes).core
        target = draw(
            st.one_of(
                st.builds(lambda p: _tag((major, minor, p)), st.integers(patch + 1, patch + 5)),
                st.builds(lambda p: _tag((major, 32, p)), st.integers(0, 9)),
            )
        )
        if parse(target) <= parse(kubernetes):
            target = _tag((major, minor, patch + 1))
        return Scene(cluster, Component.KUBERNETES, target, None, observed_kubernetes)
    kubernetes = draw(st.sampled_from(["v1.31.5", "v1.32.4", table.unknown_kubernetes()]))
    cluster = ClusterVersions(
        talos=draw(st.sampled_from(["v1.13.2", "v1.14.0", "v1.14.3"])),
        kubernetes=kubernetes,
        cilium=steps.cilium_release(preset="cilium", detected=detected, version="1.20.4"),
        cni=detected,
    )
    return Scene(
        cluster=cluster,
        component=Component.TALOS,
        target=draw(st.builds(lambda p: f"v1.14.{p}", st.integers(4, 6))),
        observed_talos=draw(st.sampled_from(["v1.9.5", "v1.10.7", "v1.11.5"])),
        observed_kubernetes=None,
    )


#: Two thirds of the examples of a property that compares verdicts aim at the case that
#: matters; the rest are the general scenes (clean, overridable, never, in any order).
aimed_scenes = st.one_of(scenes(), layered_scenes(), layered_scenes())


#: The reproduction: an admin passes the Talos pair refusal, and the Cilium is unknown.
UNKNOWN_CILIUM = Scene(
    cluster=ClusterVersions(
        talos="v1.14.3", kubernetes="v1.31.5", cilium=table.unknown_cilium(), cni="cilium"
    ),
    component=Component.KUBERNETES,
    target="v1.32.0",
    observed_talos=None,
    observed_kubernetes=None,
)
#: The digest-only Cilium: seen, its release unreadable, behind a pair refusal an admin
#: passes; it was skipped as "no Cilium" on the webhook, the plan and the executor.
UNREADABLE_CILIUM = Scene(
    cluster=ClusterVersions(
        talos="v1.14.3",
        kubernetes="v1.31.5",
        cilium=steps.cilium_release(detected="cilium", version=None),
        cni="cilium",
    ),
    component=Component.KUBERNETES,
    target="v1.32.0",
    observed_talos=None,
    observed_kubernetes=None,
)
#: The same Cilium under a Kubernetes step no other rule refuses (the reported escape).
UNREADABLE_CILIUM_CLEAN = replace(
    UNREADABLE_CILIUM, cluster=replace(UNREADABLE_CILIUM.cluster, kubernetes="v1.36.6"),
    target="v1.36.7",
)  # fmt: skip
#: The executor's: the spec's pair refusal is overridden, the Nodes run Talos v1.11.5.
OLD_NODES = Scene(
    cluster=ClusterVersions(talos="v1.14.3", kubernetes="v1.31.5", cilium="1.20.4", cni="cilium"),
    component=Component.TALOS,
    target="v1.14.4",
    observed_talos="v1.11.5",
    observed_kubernetes=None,
)


# --- the single rules of each path ----------------------------------------------------------

_NEVER = Refusal(rule=Rule.FORM, message="a never-overridable answer", overridable=False)
_UNREADABLE = Refusal(
    rule=Rule.UNREADABLE_VERSION, message="a release seen but unreadable", overridable=False
)


def cilium_answer(cilium: str | Unreadable | None, kubernetes: str) -> Refusal | None:
    """The Cilium half asked on its own, of a Cilium the status shows as detected (and
    managed): without a release (whatever the code under test made of it, None or
    ``Unreadable``), never passed."""
    if cilium is None or isinstance(cilium, Unreadable):
        return _UNREADABLE
    return compat.cilium_kubernetes_error(cilium=cilium, kubernetes=kubernetes)


def _final(target: str, component: Component) -> Refusal | None:
    try:
        check_final(target, field=str(component))
    except VersionError:
        return _NEVER
    return None


def _newer(target: str, running: str) -> Refusal | None:
    return None if parse(target) > parse(running) else _NEVER


def target_rules(
    component: Component, target: str, cluster: ClusterVersions
) -> list[Refusal | None]:
    """Each rule the target rule is made of, asked on its own."""
    final = _final(target, component)
    if final is not None:
        return [final]  # nothing else can be asked of a target that is not a release
    if component is Component.TALOS:
        return [
            _newer(target, cluster.talos),
            paths.talos_path(running=cluster.talos, target=target),
            compat.talos_kubernetes_error(talos=target, kubernetes=cluster.kubernetes),
        ]
    answers = [
        _newer(target, cluster.kubernetes),
        paths.kubernetes_skew(running=cluster.kubernetes, target=target),
        compat.talos_kubernetes_error(talos=cluster.talos, kubernetes=target),
        paths.kubernetes_pairing(target=target, talos=cluster.talos),
    ]
    if cluster.cilium_constrains:
        answers.append(cilium_answer(cluster.cilium, target))
    return answers


def observed_state(scene: Scene) -> ClusterVersions | None:
    """What the Nodes run, when it differs from the spec (the executor judges it too)."""
    moved: dict[str, Any] = {}
    if scene.observed_talos not in (None, scene.cluster.talos):
        moved["talos"] = scene.observed_talos
    if scene.observed_kubernetes not in (None, scene.cluster.kubernetes):
        moved["kubernetes"] = scene.observed_kubernetes
    return replace(scene.cluster, **moved) if moved else None


def _operation(scene: Scene, *, override: bool) -> lifecycle.Operation:
    return lifecycle.Operation.from_body(
        {
            "metadata": {"name": "op", "namespace": "team-a", "uid": "u"},
            "spec": {
                "clusterRef": {"name": "prod"},
                "type": str(scene.component),
                "version": scene.target,
                "override": override,
            },
        }
    )


def _cluster_state(scene: Scene) -> lifecycle.ClusterState:
    cni: dict[str, Any] = {}
    if scene.cluster.cni is not None:
        cni["detected"] = scene.cluster.cni
    if isinstance(scene.cluster.cilium, str):
        cni["detectedVersion"] = scene.cluster.cilium
    observed: dict[str, Any] = {"cni": cni}
    if scene.observed_talos is not None:
        observed["talosVersion"] = scene.observed_talos
    if scene.observed_kubernetes is not None:
        observed["kubernetesVersion"] = scene.observed_kubernetes
    return lifecycle.ClusterState.from_body(
        {
            "metadata": {"name": "prod"},
            "spec": {
                "talosVersion": scene.cluster.talos,
                "kubernetesVersion": scene.cluster.kubernetes,
                "versionContract": "v1.14",
                "cni": {"preset": scene.cluster.preset},
            },
            "status": observed,
        }
    )


def _object(cluster: ClusterVersions) -> ClusterObject:
    return ClusterObject(
        ref=NamespacedName("team-a", "prod"),
        talos=cluster.talos,
        kubernetes=cluster.kubernetes,
        contract="v1.14",
        cni_preset=cluster.preset,
        detected_cni=cluster.cni,
        detected_cni_version=cluster.cilium if isinstance(cluster.cilium, str) else None,
    )


def _verdict_class(verdict: Verdict) -> Class:
    if verdict.blocking is not None:
        return Class.NEVER
    return Class.OVERRIDABLE if verdict.overridable else Class.CLEAN


# --- the properties -------------------------------------------------------------------------


@pure
@given(layered_scenes())
def test_the_aimed_scenes_are_the_case_that_matters(scene: Scene) -> None:
    """What ``layered_scenes`` promises, for the scenes the webhook's paths read (a
    Kubernetes target, a Cilium this build does not know): the plan's single rules
    answer an overridable refusal first and one no override passes behind it."""
    cilium = scene.cluster.cilium
    known = (
        isinstance(cilium, str)
        and compat.cilium_kubernetes_error(cilium=cilium, kubernetes="v1.33.0") is None
    )
    if scene.component is not Component.KUBERNETES or cilium is None or known:
        return
    found = [r for r in target_rules(scene.component, scene.target, scene.cluster) if r]
    assert found, scene
    assert found[0].overridable, (scene, found)
    assert not found[-1].overridable, (scene, found)


@pure
@given(aimed_scenes)
@example(UNKNOWN_CILIUM)
@example(OLD_NODES)
@example(UNREADABLE_CILIUM)
@example(UNREADABLE_CILIUM_CLEAN)
def test_the_plan_is_never_overridable_when_one_of_its_rules_is_not(scene: Scene) -> None:
    want = classify(target_rules(scene.component, scene.target, scene.cluster), path="plan")
    event(f"verdict: {want.value}")
    got = of(check_target(component=scene.component, target=scene.target, cluster=scene.cluster))
    assert got is want, scene


@pure
@given(aimed_scenes, st.booleans())
@example(UNKNOWN_CILIUM, True)
@example(UNREADABLE_CILIUM, True)
@example(UNREADABLE_CILIUM_CLEAN, True)
def test_the_webhooks_plan_of_an_operation_follows_every_rule(scene: Scene, override: bool) -> None:
    spec = OperationSpec(
        namespace="team-a",
        name="op",
        cluster="prod",
        type=OperationType(str(scene.component)),
        version=scene.target,
        override=override,
        cni_image_version=None,
    )
    verdict = decisions.review_operation(spec=spec, cluster=_object(scene.cluster))
    want = classify(target_rules(scene.component, scene.target, scene.cluster), path="webhook plan")
    event(f"verdict: {want.value}")
    assert _verdict_class(verdict) is want, scene
    answer = decisions.answer_operation(verdict, spec=spec, requester=_holder(), holds_verb=True)
    if want is Class.NEVER:
        assert not answer.allowed, scene


@pure
@given(aimed_scenes)
@example(UNKNOWN_CILIUM)
@example(OLD_NODES)
@example(UNREADABLE_CILIUM)
@example(UNREADABLE_CILIUM_CLEAN)
def test_the_executor_judges_the_spec_and_the_observed_versions(scene: Scene) -> None:
    answers = target_rules(scene.component, scene.target, scene.cluster)
    observed = observed_state(scene)
    if observed is not None:
        answers += target_rules(scene.component, scene.target, observed)
    want = classify(answers, path="executor")
    event(f"verdict: {want.value}")
    op = _operation(scene, override=True)
    refusal = lifecycle.check_execution(op, _cluster_state(scene))
    assert of(refusal) is want, (scene, refusal)
    if want is Class.NEVER:
        assert not lifecycle.decide(refusal, override=True).runs


def _holder() -> Requester:
    return Requester(username="root", groups=("system:masters",))


@pure
@given(aimed_scenes)
@example(UNKNOWN_CILIUM)
@example(OLD_NODES)
@example(UNREADABLE_CILIUM)
@example(UNREADABLE_CILIUM_CLEAN)
def test_the_webhooks_cluster_write_asks_every_rule_before_the_override(scene: Scene) -> None:
    """A TalosCluster update that moves the scene's component to its target."""
    old = scene.cluster
    new_talos = scene.target if scene.component is Component.TALOS else old.talos
    new_kubernetes = scene.target if scene.component is Component.KUBERNETES else old.kubernetes
    new = replace(old, talos=new_talos, kubernetes=new_kubernetes)
    answers: list[Refusal | None] = []
    for value, before in ((new.talos, old.talos), (new.kubernetes, old.kubernetes)):
        if value == before:
            continue
        try:
            check_after = parse(value)
            if not value.startswith("v") or value.count(".") < 2:
                raise VersionError(value, expected="a full version")
        except VersionError:
            answers.append(_NEVER)
            continue
        answers.append(None if check_after >= parse(before) else _NEVER)
    if all(answer is None for answer in answers):
        if new.kubernetes != old.kubernetes:
            answers.append(
                compat.talos_kubernetes_error(talos=new.talos, kubernetes=new.kubernetes)
            )
            if new.cilium_constrains:
                answers.append(cilium_answer(new.cilium, new.kubernetes))
        elif new.talos != old.talos:
            answers.append(
                compat.talos_kubernetes_error(talos=new.talos, kubernetes=new.kubernetes)
            )
    want = classify(answers, path="webhook cluster write")
    event(f"verdict: {want.value}")
    verdict = decisions.review_cluster(new=_object(new), old=_object(old))
    assert _verdict_class(verdict) is want, (old, new, verdict)
    answer = decisions.answer_cluster(
        verdict,
        requester=_holder(),
        cluster=_object(new).ref,
        holds_verb=True,
        operation="UPDATE",
    )
    assert answer.allowed is (want is not Class.NEVER), (old, new, answer)


@pure
@given(talos_tag, kubernetes_tag, st.booleans())
def test_adopt_refuses_whenever_a_rule_that_no_override_passes_refuses(
    talos: str, kubernetes: str, managed: bool
) -> None:
    answers: list[Refusal | None] = [
        _NEVER if parse(talos).minor_key < ADOPT_MIN_TALOS else None,
        compat.unknown_talos(parse(talos)),
        compat.unknown_kubernetes(parse(kubernetes)),
        compat.talos_kubernetes_error(talos=talos, kubernetes=kubernetes),
    ]
    if managed:
        answers.append(
            compat.cilium_kubernetes_error(cilium=PINNED.cilium_chart, kubernetes=kubernetes)
        )
    want = classify(answers)
    event(f"verdict: {want.value}")
    verdict = check_adopt_compat(talos=talos, kubernetes=kubernetes, managed_cni=managed)
    if want is Class.NEVER:
        assert verdict.refusal is not None
        assert not verdict.refusal.overridable
    else:
        assert verdict.refusal is None
        assert bool(verdict.warnings) is (want is Class.OVERRIDABLE)


@pure
@given(talos_tag, kubernetes_tag, some_cilium)
@example("v1.14.3", "v1.32.0", table.unknown_cilium())
def test_init_names_the_unknown_version_whenever_one_rule_answers_it(
    talos: str, kubernetes: str, cilium: str
) -> None:
    answers = [
        compat.talos_kubernetes_error(talos=talos, kubernetes=kubernetes),
        compat.cilium_kubernetes_error(cilium=cilium, kubernetes=kubernetes),
    ]
    contract = f"v1.{parse(talos).minor}"
    refusal = check_init_compat(
        ReleaseSet(talos=talos, kubernetes=kubernetes, contract=contract, cilium_chart=cilium)
    )
    if any(answer is not None and answer.rule is Rule.UNKNOWN_VERSION for answer in answers):
        assert refusal is not None
        assert refusal.rule is Rule.UNKNOWN_VERSION, refusal
    if classify(answers) is Class.CLEAN:
        assert refusal is None
    if refusal is not None:
        assert not refusal.overridable


RELEASES = {
    Component.TALOS: tuple(f"v1.{m}.{p}" for m in range(11, 16) for p in range(0, 7)),
    Component.KUBERNETES: tuple(f"v1.{m}.{p}" for m in range(29, 39) for p in range(0, 8)),
}


@pure
@given(aimed_scenes)
@example(UNKNOWN_CILIUM)
@example(OLD_NODES)
@example(UNREADABLE_CILIUM)
@example(UNREADABLE_CILIUM_CLEAN)
def test_a_blocked_line_is_never_overridable_when_one_rule_is_not(scene: Scene) -> None:
    version = parse(scene.target)
    if not version.is_final:
        return
    if version <= parse(
        scene.cluster.talos if scene.component is Component.TALOS else scene.cluster.kubernetes
    ):
        return
    want = classify(target_rules(scene.component, version.tag, scene.cluster), path="blocked line")
    event(f"verdict: {want.value}")
    line = blocked.explain(component=scene.component, version=version, cluster=scene.cluster)
    if want is Class.NEVER:
        assert line is not None, scene
        assert line.refusal is not None, scene
        assert not line.overridable, (scene, line)
    elif want is Class.OVERRIDABLE:
        assert line is not None, scene
        assert line.overridable, (scene, line)


@pure
@given(scenes())
@example(UNKNOWN_CILIUM)
@example(OLD_NODES)
@example(UNREADABLE_CILIUM)
@example(UNREADABLE_CILIUM_CLEAN)
def test_every_offered_choice_passes_every_single_rule(scene: Scene) -> None:
    choose = (
        upgrade_choices.talos_choices
        if scene.component is Component.TALOS
        else upgrade_choices.kubernetes_choices
    )
    choices = choose(cluster=scene.cluster, releases=RELEASES[scene.component])
    for version in choices.offered:
        answers = target_rules(scene.component, version.tag, scene.cluster)
        assert classify(answers) is Class.CLEAN, (scene, version)


@settings(
    database=None,
    deadline=None,
    max_examples=EXAMPLES // 8,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(scenes())
def test_every_step_of_a_path_plan_passes_every_single_rule(scene: Scene) -> None:
    result = path_plan.plan_path(
        cluster=scene.cluster,
        talos_releases=RELEASES[Component.TALOS],
        kubernetes_releases=RELEASES[Component.KUBERNETES],
    )
    for step in result.steps:
        if step.component is Component.CNI:
            continue
        answers = target_rules(step.component, step.target, step.before)
        assert classify(answers) is Class.CLEAN, (scene, step)


NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


@pure
@given(scenes())
@example(UNKNOWN_CILIUM)
@example(OLD_NODES)
@example(UNREADABLE_CILIUM)
@example(UNREADABLE_CILIUM_CLEAN)
def test_versions_compatible_names_an_unknown_version_whenever_one_rule_answers_it(
    scene: Scene,
) -> None:
    cluster = scene.cluster
    answers = [compat.talos_kubernetes_error(talos=cluster.talos, kubernetes=cluster.kubernetes)]
    if cluster.cilium_constrains:
        answers.append(cilium_answer(cluster.cilium, cluster.kubernetes))
    outcome = status.evaluate(
        spec={
            "talosVersion": cluster.talos,
            "kubernetesVersion": cluster.kubernetes,
            "versionContract": "v1.14",
            "cni": {"preset": cluster.preset},
        },
        generation=1,
        previous=TalosClusterStatus(),
        observation=Observation(
            nodes=NodesObservation(
                count=1,
                talos_versions=(cluster.talos,),
                kubernetes_versions=(cluster.kubernetes,),
                unreadable=(),
            ),
            cni=CNIObservation(
                detected=cluster.cni,
                version=cluster.cilium if isinstance(cluster.cilium, str) else None,
            ),
        ),
        failure=None,
        installation=status.Installation(
            present=True,
            targets=UpgradeTargets(
                checked_at=NOW,
                talos=RELEASES[Component.TALOS],
                kubernetes=RELEASES[Component.KUBERNETES],
            ),
        ),
        now=NOW,
    )
    (compatible,) = [
        c for c in outcome.status.conditions if c.type == ClusterConditionType.VERSIONS_COMPATIBLE
    ]
    if any(answer is not None and answer.rule is Rule.UNKNOWN_VERSION for answer in answers):
        assert compatible.reason == ClusterReason.UNKNOWN_VERSION, (scene, compatible)
    elif _UNREADABLE in answers:
        assert compatible.reason == ClusterReason.CILIUM_VERSION_UNREADABLE, (scene, compatible)
    assert (compatible.status == "True") is (classify(answers) is Class.CLEAN), (scene, compatible)
