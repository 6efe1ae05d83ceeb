"""docs/gitops.md runs: its Argo CD health script (in Lua 5.1, the dialect of Argo CD's
gopher-lua) judges the objects Ichor writes, its Renovate managers find the versions of
its own TalosCluster example and nothing else, and its manifests parse as what they say.

The objects are made by Ichor's own pure status rules, so the script is checked against
the shape the operator writes, not against a hand-written copy.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import re2  # type: ignore[import-untyped]
import yaml
from lupa import lua51  # type: ignore[import-untyped]

from ichor.api.conditions import ConditionStatus
from ichor.api.conditions import SpecReachedReason as Reason
from ichor.api.taloscluster import TalosClusterSpec, TalosClusterStatus
from ichor.controller.declarative.decisions import ActiveOperation, Decision
from ichor.controller.releasecheck import decisions as releasecheck_decisions
from ichor.controller.taloscluster.status import evaluate
from ichor.controller.talosoperation import lifecycle
from ichor.controller.talosoperation.lifecycle import Operation
from tests.unit.controller.test_status_rules import LISTED, seen

ROOT = Path(__file__).resolve().parents[3]
PAGE = (ROOT / "docs" / "gitops.md").read_text()
NOW = datetime(2026, 12, 3, 8, 0, tzinfo=UTC)


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE, flags=re.DOTALL)


def health_script() -> str:
    (config,) = [b for b in blocks("yaml") if "argocd-cm" in b]
    data = yaml.safe_load(config)["data"]
    scripts = {k: v for k, v in data.items() if k.startswith("resource.customizations.health.")}
    assert set(scripts) == {
        "resource.customizations.health.ichor.dev_TalosCluster",
        "resource.customizations.health.ichor.dev_TalosOperation",
        "resource.customizations.health.ichor.dev_IchorInstallation",
    }
    assert len(set(scripts.values())) == 1  # the anchor: one script for the three
    return str(next(iter(scripts.values())))


def health(obj: dict[str, Any]) -> tuple[str, str]:
    """The script run as Argo CD runs it: ``obj`` a global table, the result a table."""
    lua = lua51.LuaRuntime()
    lua.globals().obj = lua.table_from(json.loads(json.dumps(obj)), recursive=True)
    result = lua.execute(health_script())
    return str(result["status"]), str(result["message"])


def body(kind: str, status: Any, *, generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", "generation": generation},
        "status": status,
    }


def _operation(status: dict[str, Any] | None = None) -> Operation:
    return Operation.from_body(
        {
            "metadata": {
                "name": "up", "namespace": "ns", "uid": "u", "generation": 1,
                "resourceVersion": "1", "creationTimestamp": "2026-12-03T07:00:00Z",
            },
            "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.4"},
            "status": status or {},
        }
    )  # fmt: skip


def test_an_operation_is_progressing_then_healthy_or_degraded() -> None:
    assert health(body("TalosOperation", None))[0] == "Progressing"
    pending = lifecycle.pending(_operation(), reason="Waiting", message="waits for a", now=NOW)
    assert health(body("TalosOperation", pending.to_api())) == ("Progressing", "waits for a")
    running = lifecycle.running(
        _operation(pending.to_api()), job_name="j", decision=lifecycle.Decision(),
        job_created=True, message="the Job runs", now=NOW,
    )  # fmt: skip
    assert health(body("TalosOperation", running.to_api())) == ("Progressing", "the Job runs")
    done = lifecycle.succeeded(_operation(running.to_api()), message="installed", now=NOW)
    assert health(body("TalosOperation", done.to_api())) == ("Healthy", "installed")
    failed = lifecycle.failed(
        _operation(running.to_api()), reason="JobFailed", message="no", now=NOW
    )
    assert health(body("TalosOperation", failed.to_api())) == ("Degraded", "no")


def _cluster(**kwargs: Any) -> dict[str, Any]:
    spec = {
        "talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.7", "versionContract": "v1.14",
        "upgradeStrategy": "Declarative",
    }  # fmt: skip
    outcome = evaluate(
        spec=spec, generation=1, previous=TalosClusterStatus(), observation=seen(),
        failure=None, installation=LISTED, now=NOW, **kwargs,
    )  # fmt: skip
    return outcome.status.to_api()


def test_a_cluster_is_healthy_progressing_or_degraded_as_kstatus_reads_it() -> None:
    reached = Decision(Reason.REACHED, "at the spec", status=ConditionStatus.TRUE)
    assert health(body("TalosCluster", _cluster(declared=reached.declared())))[0] == "Healthy"
    upgrading = Decision(Reason.UPGRADING, "TalosOperation d is Running")
    assert health(body("TalosCluster", _cluster(declared=upgrading.declared()))) == (
        "Progressing", "TalosOperation d is Running"
    )  # fmt: skip
    refused = Decision(Reason.REFUSED, "the start was refused: rule Final")
    assert health(body("TalosCluster", _cluster(declared=refused.declared()))) == (
        "Degraded", "the start was refused: rule Final"
    )  # fmt: skip
    active = [ActiveOperation(name="up", what="talos v1.14.4", phase="Running")]
    assert health(body("TalosCluster", _cluster(active=active)))[0] == "Progressing"


def test_a_status_of_an_older_generation_is_progressing_whatever_it_says() -> None:
    reached = Decision(Reason.REACHED, "at the spec", status=ConditionStatus.TRUE)
    stale = body("TalosCluster", _cluster(declared=reached.declared()), generation=2)
    status, message = health(stale)
    assert status == "Progressing"
    assert "generation 2" in message
    # a condition of an older generation does not count either
    status_only = _cluster(declared=reached.declared())
    status_only.pop("observedGeneration")
    assert health(body("TalosCluster", status_only, generation=2))[0] == "Progressing"


def test_the_installation_is_healthy_or_degraded_by_its_listing() -> None:
    from ichor.api.ichorinstallation import LatestRelease, UpgradeTargets

    for error, expected in ((None, "Healthy"), ("registry answered 503", "Degraded")):
        found = releasecheck_decisions.check_conditions(
            targets=UpgradeTargets(checked_at=NOW, talos=("v1.14.4",), kubernetes=(),
                                   talos_error=error),
            latest=LatestRelease(checked_at=NOW, version="0.1.0", running="0.1.0", newer=False),
            repository="oci://example.invalid/ichor", generation=1, now=NOW,
        )  # fmt: skip
        status = {"observedGeneration": 1, "conditions": [c.to_api() for c in found]}
        assert health(body("IchorInstallation", status))[0] == expected


@pytest.mark.parametrize(
    "status",
    [
        {"conditions": []},
        {"conditions": [{"type": "Other", "status": "True"}]},
        {"conditions": [{"type": "Ready", "status": "Unknown"}]},
        {"observedGeneration": 1},
    ],
)
def test_what_the_script_cannot_judge_is_progressing_never_healthy(status: Any) -> None:
    assert health(body("TalosCluster", status))[0] == "Progressing"


# --- Renovate ---------------------------------------------------------------------------


def renovate() -> dict[str, Any]:
    (config,) = [json.loads(b) for b in blocks("json") if "customManagers" in b]
    assert isinstance(config, dict)
    return config


def _python(pattern: str) -> re.Pattern[str]:
    """Renovate's JavaScript regex in Python's syntax: only the named groups differ;
    the pattern uses nothing else the two engines read differently."""
    assert "(?<=" not in pattern
    assert "(?<!" not in pattern
    return re.compile(pattern.replace("(?<", "(?P<"))


def _re2(pattern: str) -> Any:
    """The pattern as Renovate compiles a custom manager's ``matchStrings``: with RE2,
    which refuses what it cannot run in linear time (lookarounds, backreferences). A
    pattern RE2 refuses is a manager Renovate rejects, so this raises for it."""
    return re2.compile(pattern)


def values(pattern: str, text: str) -> list[str]:
    """The ``currentValue`` of each match, as RE2 finds them; Python's engine (the
    JavaScript reading, named groups aside) must find the same."""
    found = [m.group("currentValue") for m in _re2(pattern).finditer(text)]
    assert found == [m.group("currentValue") for m in _python(pattern).finditer(text)]
    return found


def example() -> str:
    (found,) = [
        b
        for b in blocks("yaml")
        if b.startswith("apiVersion: ichor.dev/v1alpha1\nkind: TalosCluster\n")
    ]
    return found


def test_the_example_is_a_declarative_taloscluster_the_model_reads() -> None:
    manifest = yaml.safe_load(example())
    spec = TalosClusterSpec.model_validate(manifest["spec"])
    assert spec.upgrade_strategy.value == "Declarative"


def test_the_renovate_managers_find_each_version_of_the_example_and_from_which_registry() -> None:
    managers = renovate()["customManagers"]
    found = {}
    for manager in managers:
        (pattern,) = manager["matchStrings"]
        found[manager["depNameTemplate"]] = values(pattern, example())
        assert manager["datasourceTemplate"] == "docker"
    manifest = yaml.safe_load(example())["spec"]
    assert found == {
        "ghcr.io/siderolabs/installer-base": [manifest["talosVersion"]],
        "ghcr.io/siderolabs/kubelet": [manifest["kubernetesVersion"]],
    }
    rules = renovate()["packageRules"]
    assert rules[0]["separateMinorPatch"] is True
    assert set(rules[0]["matchDepNames"]) == set(found)


def test_the_registries_are_the_release_checks_defaults() -> None:
    from ichor.api.ichorinstallation import ReleaseCheckSpec

    defaults = ReleaseCheckSpec()
    names = {m["depNameTemplate"] for m in renovate()["customManagers"]}
    assert names == {defaults.talos_repository, defaults.kubernetes_repository}


def test_the_managers_match_only_taloscluster_documents_each_once() -> None:
    text = (
        "apiVersion: v1\nkind: ConfigMap\ndata:\n  talosVersion: v1.0.0\n"
        "  kubernetesVersion: v1.30.0\n---\n" + example() + "---\n"
        "kind: TalosClusterList\nspec:\n  talosVersion: v9.9.9\n---\n"
        "apiVersion: ichor.dev/v1alpha1\nkind: TalosCluster\nmetadata:\n  name: b\nspec:\n"
        "  kubernetesVersion: \"v1.35.2\"\n  talosVersion: 'v1.13.2'\n"
    )
    for manager in renovate()["customManagers"]:
        (pattern,) = manager["matchStrings"]
        found = values(pattern, text)
        if manager["depNameTemplate"].endswith("installer-base"):
            assert found == ["v1.14.3", "v1.13.2"]
        else:
            assert found == ["v1.36.6", "v1.35.2"]


def test_the_flux_kustomization_checks_the_health_of_a_taloscluster() -> None:
    (kustomization,) = [yaml.safe_load(b) for b in blocks("yaml") if "kind: Kustomization" in b]
    assert kustomization["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    (check,) = kustomization["spec"]["healthChecks"]
    assert (check["apiVersion"], check["kind"]) == ("ichor.dev/v1alpha1", "TalosCluster")
    assert kustomization["spec"]["prune"] is False


def test_each_manager_compiles_with_re2_as_renovate_compiles_it() -> None:
    for manager in renovate()["customManagers"]:
        for pattern in manager["matchStrings"]:
            assert _re2(pattern).groupindex["currentValue"] >= 1


def test_a_manager_never_reads_past_the_document_separator() -> None:
    """A TalosCluster that does not name the field (or names it after a list, a flag, a
    dash in a value) is read to its end and no further: the next document's field is
    not its version."""
    text = (
        "kind: TalosCluster\nmetadata:\n  name: a\n  annotations:\n    note: a - b -- c\n"
        "spec:\n  autoPatch:\n    windows:\n      - days: [Mon]\n        args: --x\n"
        "---\nkind: ConfigMap\ndata:\n  talosVersion: v1.0.0\n  kubernetesVersion: v1.30.0\n"
        "---\nkind: TalosCluster\nspec:\n  list:\n  - a\n  - --b\n"
        "  talosVersion: v1.14.9\n  kubernetesVersion: v1.36.9\n"
    )
    for manager in renovate()["customManagers"]:
        (pattern,) = manager["matchStrings"]
        found = values(pattern, text)
        if manager["depNameTemplate"].endswith("installer-base"):
            assert found == ["v1.14.9"]
        else:
            assert found == ["v1.36.9"]
