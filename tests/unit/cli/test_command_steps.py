"""The named steps of ``ichor autopatch unhalt``, of adopt's stored kubeconfig and of the
rows of ``ichor status`` and ``ichor operations``."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import pytest
import yaml

from ichor.api.autopatch import UNHALT_ANNOTATION, Halt
from ichor.api.taloscluster import ChoiceGroup, CNIStatus
from ichor.cli import autopatch, clusters, kube, views

NOW = datetime(2026, 6, 1, 2, 30, tzinfo=UTC)


def halt(operation: str, *, lifted_by: str | None = None) -> Halt:
    return Halt(
        component="talos",
        version="v1.14.5",
        cluster="prod",
        operation=operation,
        reason="UpgradeFailed",
        time=NOW,
        until=NOW + timedelta(hours=1),
        lifted_by=lifted_by,
    )


# --- unhalt -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("component", "version", "everything"),
    [(None, None, False), ("talos", "v1.14.5", True), ("talos", None, True)],
)
def test_unhalt_request_is_a_version_or_all_never_both(
    component: str | None, version: str | None, everything: bool
) -> None:
    with pytest.raises(click.UsageError, match="name COMPONENT VERSION"):
        autopatch._unhalt_request(component, version, everything=everything)


def test_unhalt_request_reads_the_value() -> None:
    assert autopatch._unhalt_request(None, None, everything=True).everything
    request = autopatch._unhalt_request("talos", "v1.14.5", everything=False)
    assert (request.component, request.version) == ("talos", "v1.14.5")
    with pytest.raises(click.UsageError):
        autopatch._unhalt_request("etcd", "v3.6.0", everything=False)


def test_acted_on_returns_once_the_annotation_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = [
        {"metadata": {"annotations": {UNHALT_ANNOTATION: "all"}}},
        {"metadata": {"annotations": {}}, "status": {}},
    ]
    monkeypatch.setattr(kube, "get_installation", lambda _: seen.pop(0))
    monkeypatch.setattr(
        "ichor.cli.autopatch.time", SimpleNamespace(monotonic=time.monotonic, sleep=lambda _: None)
    )
    assert autopatch._acted_on(object(), what="every halt") == {  # type: ignore[arg-type]
        "metadata": {"annotations": {}},
        "status": {},
    }
    assert seen == []


def test_acted_on_gives_up_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, autopatch.UNHALT_WAIT + 1])
    monkeypatch.setattr(
        kube,
        "get_installation",
        lambda _: {"metadata": {"annotations": {UNHALT_ANNOTATION: "all"}}},
    )
    monkeypatch.setattr(
        "ichor.cli.autopatch.time",
        SimpleNamespace(monotonic=lambda: next(clock), sleep=lambda _: None),
    )
    with pytest.raises(kube.CliError, match="has not acted within 30 s"):
        autopatch._acted_on(object(), what="every halt")  # type: ignore[arg-type]


def installation(*halts: Halt) -> dict[str, Any]:
    return {
        "status": {
            "autoPatch": {"halts": [h.model_dump(mode="json", by_alias=True) for h in halts]}
        }
    }


def test_lifted_names_only_the_halts_lifted_of_those_in_force() -> None:
    said = autopatch._lifted(
        installation(halt("auto-a", lifted_by="alice"), halt("auto-b", lifted_by="bob")),
        [halt("auto-a")],
        what="every halt",
        of="",
    )
    assert said.startswith(
        "Lifted every halt: talos v1.14.5 (failed on prod, TalosOperation auto-a"
    )
    assert "auto-b" not in said
    assert "lifted by alice" in said
    nothing = autopatch._lifted(
        installation(halt("auto-a")), [halt("auto-a")], what="x", of=" of talos v1.14.5"
    )
    assert (
        nothing == "No auto-patch halt of talos v1.14.5 was in force any more: nothing was lifted."
    )


# --- adopt's kubeconfig -----------------------------------------------------------------------


def kubeconfig(tmp_path: Path, **user: Any) -> Path:
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(
            {
                "current-context": "b",
                "contexts": [
                    {"name": "a", "context": {"cluster": "one", "user": "u"}},
                    {"name": "b", "context": {"cluster": "two", "user": "u"}},
                ],
                "clusters": [
                    {"name": "one", "cluster": {"server": "https://one"}},
                    {"name": "two", "cluster": {"server": "https://two"}},
                ],
                "users": [{"name": "u", "user": user}],
            }
        )
    )
    return path


def test_context_entries_follow_the_context(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, token="t")
    ctx, cluster, user = clusters._context_entries(path, None, what="k")
    assert (ctx["name"], cluster["name"], user["name"]) == ("b", "two", "u")
    _, cluster, _ = clusters._context_entries(path, "a", what="k")
    assert cluster["name"] == "one"
    with pytest.raises(kube.CliError, match="its context c does not name one cluster"):
        clusters._context_entries(path, "c", what="k")
    with pytest.raises(kube.CliError, match=r"\(current\) does not name"):
        clusters._context_entries(tmp_path / "missing", None, what="k")


def test_inline_files_reads_each_file_beside_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "token.crt").write_bytes(b"CERT")
    entry: dict[str, Any] = {"user": {"client-certificate": "token.crt", "token": "t"}}
    clusters._inline_files(tmp_path / "config", entry, "user", what="k")
    assert entry["user"] == {
        "token": "t",
        "client-certificate-data": base64.b64encode(b"CERT").decode(),
    }
    missing: dict[str, Any] = {"user": {"client-key": "gone.key"}}
    with pytest.raises(kube.CliError, match=r"k: client-key .*gone\.key"):
        clusters._inline_files(tmp_path / "config", missing, "user", what="k")
    clusters._inline_files(tmp_path / "config", {"user": None}, "user", what="k")


# --- the rows of status and operations ----------------------------------------------------


def test_cilium_cell() -> None:
    assert views._cilium_cell(None) == "-"
    assert views._cilium_cell(CNIStatus()) == "-"
    assert views._cilium_cell(CNIStatus(detected="cilium", detected_version="1.20.4")) == "1.20.4"
    assert views._cilium_cell(CNIStatus(detected="cilium")) == "cilium (version unread)"
    assert views._cilium_cell(CNIStatus(detected="flannel")) == "(flannel)"


def test_default_cell() -> None:
    assert views._default_cell(None) == "-"
    assert views._default_cell(ChoiceGroup()) == "-"
    assert views._default_cell(ChoiceGroup(default="v1.14.5")) == "v1.14.5"


def test_status_message_says_incompatible_before_not_ready() -> None:
    assert views._status_message(None, None) == ""
    assert views._status_message(("True", "fine"), ("True", "up")) == ""
    assert views._status_message(("False", "pair refused"), ("False", "down")) == "pair refused"
    assert views._status_message(("True", "fine"), ("Unknown", "not read")) == "not read"


def test_target_and_operation_row_read_what_is_there() -> None:
    assert views._target({}) == ""
    assert views._target({"spec": {"clusterRef": None}}) == ""
    body = {
        "metadata": {"namespace": "ns", "name": "op", "creationTimestamp": "2026-06-01T02:00:00Z"},
        "spec": {"clusterRef": {"name": "prod"}, "type": "talos", "version": "v1.14.5"},
        "status": {"phase": "Running", "jobName": "job-1", "message": "upgrading"},
    }
    assert views._target(body) == "prod"
    row = views._operation_row(body, now=NOW)
    assert (row.cluster, row.type, row.version, row.phase, row.age, row.job, row.message) == (
        "prod", "talos", "v1.14.5", "Running", "30m", "job-1", "upgrading",
    )  # fmt: skip
    bare = views._operation_row({}, now=NOW)
    assert (bare.cluster, bare.type, bare.phase, bare.age, bare.created) == (
        "-", "-", "Pending", "-", "",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("ago", "shown"),
    [
        (timedelta(seconds=-2), "<invalid>"),
        (timedelta(seconds=-1), "0s"),
        (timedelta(seconds=70), "70s"),
        (timedelta(seconds=190), "3m10s"),
        (timedelta(minutes=5), "5m"),
        (timedelta(minutes=70), "70m"),
        (timedelta(hours=3, minutes=10), "3h10m"),
        (timedelta(hours=3), "3h"),
        (timedelta(hours=47), "47h"),
        (timedelta(hours=49), "2d1h"),
        (timedelta(days=3), "3d"),
        (timedelta(hours=8 * 24 + 2), "8d"),
        (timedelta(days=367), "367d"),
        (timedelta(hours=365 * 2 * 24 + 25), "2y1d"),
        (timedelta(days=365 * 3), "3y"),
        (timedelta(hours=365 * 8 * 24 + 2), "8y"),
    ],
)
def test_the_age_column_reads_as_kubectls(ago: timedelta, shown: str) -> None:
    """apimachinery's ``duration.HumanDuration`` (its own test's table, and each unit's
    rest of 0 and not 0)."""
    assert views.age(NOW - ago, NOW) == shown
