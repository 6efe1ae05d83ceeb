"""``AutoPatcher.reconcile`` with its requests replaced by an in-memory API: what is read
afresh inside the fleet lock, what is asked outside it, and the halt kept in place."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ichor.api.autopatch import HALTED_ANNOTATION, FleetAutoPatchStatus, Halt
from ichor.api.talosoperation import STARTED_BY_LABEL
from ichor.controller.autopatch import decisions as d
from ichor.controller.autopatch import runner
from ichor.controller.talosoperation import creating, start_request
from tests.unit.autopatch.test_decisions import status

NOW = datetime(2026, 6, 1, 2, 30, tzinfo=UTC)  # inside 02:00-06:00 UTC
WINDOW = {"schedule": "0 2 * * *", "duration": "4h"}


def cluster_body(name: str = "prod", **auto_patch: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "ns", "name": name, "uid": f"uid-{name}"},
        "spec": {
            "talosVersion": "v1.14.3",
            "kubernetesVersion": "v1.36.6",
            "versionContract": "v1.14",
            "autoPatch": {
                "components": ["talos"],
                "windows": [WINDOW],
                "minReleaseAge": "0m",
                **auto_patch,
            },
        },
    }


def operation(
    name: str, *, cluster: str, phase: str | None, version: str = "v1.14.5",
    created: datetime = NOW - timedelta(minutes=20), finished: datetime | None = None,
    failure: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """An auto-patch operation; a Failed one ran on its nodes and failed unless
    ``failure`` says otherwise."""
    if phase == "Failed" and failure is None:
        failure = "UpgradeFailed"
    return {
        "metadata": {
            "namespace": "ns", "name": name,
            "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "labels": {STARTED_BY_LABEL: "auto-patch"},
            "ownerReferences": [{"kind": "TalosCluster", "name": cluster, "uid": f"uid-{cluster}"}],
        },
        "spec": {"clusterRef": {"name": cluster}, "type": "talos", "version": version},
        "status": {
            **({"phase": phase} if phase else {}),
            **({"finishedAt": finished.strftime("%Y-%m-%dT%H:%M:%SZ")} if finished else {}),
            **({"failure": failure} if failure else {}),
            "message": "Job failed",
        },
    }  # fmt: skip


class Api:
    """The objects the patcher reads and writes, and what happened to them."""

    def __init__(self) -> None:
        self.installation: dict[str, Any] = {
            "metadata": {"name": "ichor", "resourceVersion": "1"},
            "spec": {"autoPatch": {"maxConcurrentClusters": 1}},
            "status": {
                "upgradeTargets": {"talos": ["v1.14.5", "v1.14.4"], "kubernetes": ["v1.36.6"]},
                "autoPatch": {
                    "seen": [
                        {"component": "talos", "version": v, "firstSeen": "2026-05-01T00:00:00Z"}
                        for v in ("v1.14.5", "v1.14.4")
                    ]
                    + [
                        {
                            "component": "kubernetes",
                            "version": "v1.36.6",
                            "firstSeen": "2026-05-01T00:00:00Z",
                        }
                    ],
                },
            },
        }
        self.operations: list[dict[str, Any]] = []
        self.writes: list[FleetAutoPatchStatus] = []
        self.failing_writes = 0
        self.started: list[start_request.StartRequest] = []
        self.marks: list[str] = []

    def fleet(self) -> FleetAutoPatchStatus:
        return FleetAutoPatchStatus.model_validate(self.installation["status"]["autoPatch"])


class Patcher(runner.AutoPatcher):
    def __init__(self, api: Api, *, clock: list[datetime]) -> None:
        super().__init__(api=object())  # type: ignore[arg-type]
        self.clock = lambda: clock[0]
        self.fake = api
        self.clock_value = clock
        #: Whether the fleet lock was held while the workload was asked.
        self.locked_while_asking: list[bool] = []
        #: Moves the clock while the workload is asked (a slow /readyz and checks).
        self.asking_takes = timedelta(0)

    async def _operations(
        self, namespace: str | None, *, selector: str = ""
    ) -> list[dict[str, Any]]:
        found = [
            copy.deepcopy(o)
            for o in self.fake.operations
            if namespace is None or o["metadata"]["namespace"] == namespace
        ]
        if selector:
            key, value = selector.split("=")
            found = [o for o in found if o["metadata"].get("labels", {}).get(key) == value]
        return found

    async def _installation(self) -> dict[str, Any] | None:
        return copy.deepcopy(self.fake.installation)

    async def _write_fleet(self, body: Mapping[str, Any], fleet: FleetAutoPatchStatus) -> bool:
        if self.fake.failing_writes:
            self.fake.failing_writes -= 1
            return False
        current = self.fake.installation["metadata"]["resourceVersion"]
        if body["metadata"]["resourceVersion"] != current:
            return False
        self.fake.installation["status"]["autoPatch"] = fleet.to_api()
        self.fake.installation["metadata"]["resourceVersion"] = str(int(current) + 1)
        self.fake.writes.append(fleet)
        return True

    async def _mark_halted(self, namespace: str, halt: Halt) -> None:
        self.fake.marks.append(halt.operation)
        for body in self.fake.operations:
            if body["metadata"]["name"] == halt.operation:
                body["metadata"].setdefault("annotations", {})[HALTED_ANNOTATION] = "x"

    async def _readyz(self, workload: Any) -> d.Probe:
        self.locked_while_asking.append(self._lock.locked())
        self.clock_value[0] += self.asking_takes
        return d.Probe(ok=True)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Api:
    made = Api()

    async def start(
        _: object, *, request: start_request.StartRequest, owes: object = None
    ) -> creating.Started:
        made.started.append(request)
        name = f"auto-{request.cluster.name}-{request.version}"
        body = operation(name, cluster=request.cluster.name, phase=None, version=request.version,
                         created=NOW)  # fmt: skip
        made.operations.append(body)
        return creating.Started(name=name, created=True, body=body)

    monkeypatch.setattr(creating, "start_operation", start)
    return made


async def reconcile(
    patcher: Patcher, api: Api, *, body: dict[str, Any] | None = None,
    installation: dict[str, Any] | None = None, now: datetime = NOW, **kwargs: Any,
) -> runner.Result:  # fmt: skip
    return await patcher.reconcile(
        body=body or cluster_body(),
        status=kwargs.pop("st", None) or status(kubernetes_patch=()),
        not_ready=(),
        workload=object(),  # type: ignore[arg-type]
        installation=copy.deepcopy(installation or api.installation),
        now=now,
    )


def reason(result: runner.Result) -> str:
    assert result.condition is not None
    return result.condition.reason


async def test_the_workload_is_asked_outside_the_fleet_lock(api: Api) -> None:
    patcher = Patcher(api, clock=[NOW])
    result = await reconcile(patcher, api)
    assert reason(result) == "Started"
    assert patcher.locked_while_asking == [False]


async def test_the_window_is_judged_again_after_the_workload_was_asked(api: Api) -> None:
    """/readyz and the checks took long: the window closed meanwhile; nothing starts."""
    patcher = Patcher(api, clock=[NOW.replace(hour=5, minute=59)])
    patcher.asking_takes = timedelta(minutes=2)
    result = await reconcile(patcher, api, now=NOW.replace(hour=5, minute=59))
    assert reason(result) == "WindowClosed"
    assert api.started == []


async def test_a_halt_recorded_since_the_cache_was_read_is_met_in_the_lock(api: Api) -> None:
    cached = copy.deepcopy(api.installation)
    api.installation["status"]["autoPatch"]["halts"] = [
        {"component": "talos", "version": "v1.14.5", "cluster": "ns/edge", "operation": "op-edge",
         "reason": "Job failed", "time": "2026-06-01T02:25:00Z", "until": "2026-06-01T06:00:00Z"},
    ]  # fmt: skip
    patcher = Patcher(api, clock=[NOW])
    result = await reconcile(patcher, api, installation=cached)
    assert reason(result) == "Started"
    assert [r.version for r in api.started] == ["v1.14.4"]


async def test_a_failure_on_another_cluster_not_recorded_yet_halts_its_version(api: Api) -> None:
    """edge's patch failed a minute ago; edge has not looked since, so no halt is recorded:
    the fleet's listing in the lock already shows it."""
    api.operations.append(
        operation("op-edge", cluster="edge", phase="Failed", finished=NOW - timedelta(minutes=1))
    )
    patcher = Patcher(api, clock=[NOW])
    result = await reconcile(patcher, api)
    assert reason(result) == "Started"
    assert [r.version for r in api.started] == ["v1.14.4"]


async def test_another_start_in_between_is_counted_in_the_lock(api: Api) -> None:
    """Two clusters asked their workloads at the same time: the second to take the lock
    counts the first one's operation (maxConcurrentClusters 1)."""
    patcher = Patcher(api, clock=[NOW])
    first = await reconcile(patcher, api, body=cluster_body("edge"))
    assert reason(first) == "Started"
    second = await reconcile(patcher, api)
    assert reason(second) == "FleetBusy"
    assert [r.cluster.name for r in api.started] == ["edge"]


async def test_a_halt_whose_write_failed_is_written_at_the_next_look(api: Api) -> None:
    api.operations.append(
        operation("op-prod", cluster="prod", phase="Failed", finished=NOW - timedelta(minutes=1))
    )
    patcher = Patcher(api, clock=[NOW])
    api.failing_writes = 3  # every try of the first look
    first = await reconcile(patcher, api)
    assert reason(first) == "PatchFailed"
    assert api.fleet().halts == ()
    st = status(kubernetes_patch=(), auto_patch=first.status)
    again = await reconcile(patcher, api, st=st, now=NOW + timedelta(minutes=1))
    assert reason(again) == "PatchFailed"
    assert again.events == ()  # the Event was the first look's
    (halt,) = api.fleet().halts
    assert (halt.operation, halt.version, halt.until) == (
        "op-prod", "v1.14.5", NOW.replace(hour=6, minute=0),
    )  # fmt: skip
    assert api.marks == ["op-prod"]  # the failed operation says its halt is recorded
    writes = len(api.writes)
    # recorded and marked: the next look neither writes nor marks again
    third = await reconcile(patcher, api, st=st, now=NOW + timedelta(minutes=2))
    assert reason(third) == "PatchFailed"
    assert len(api.writes) == writes
    assert api.marks == ["op-prod"]


async def test_a_marked_failure_whose_halt_left_the_record_halts_nothing_again(
    api: Api,
) -> None:
    """The record dropped the halt (it is over, or an admin removed it): the failing
    cluster does not write it back, and another cluster's start does not take the
    failure as a halt by itself."""
    failed = operation(
        "op-prod", cluster="prod", phase="Failed", finished=NOW - timedelta(minutes=1)
    )
    api.operations.append(failed)
    patcher = Patcher(api, clock=[NOW])
    first = await reconcile(patcher, api)
    assert len(api.fleet().halts) == 1
    api.installation["status"]["autoPatch"]["halts"] = []
    st = status(kubernetes_patch=(), auto_patch=first.status)
    await reconcile(patcher, api, st=st, now=NOW + timedelta(minutes=1))
    assert api.fleet().halts == ()
    edge = await reconcile(patcher, api, body=cluster_body("edge"), now=NOW + timedelta(minutes=1))
    assert reason(edge) == "Started"
    assert [(r.cluster.name, r.version) for r in api.started] == [("edge", "v1.14.5")]


async def test_a_write_of_the_seen_record_drops_the_halts_that_are_over(api: Api) -> None:
    api.installation["status"]["upgradeTargets"]["talos"] = ["v1.14.6", "v1.14.5", "v1.14.4"]
    api.installation["status"]["autoPatch"]["halts"] = [
        {"component": "talos", "version": "v1.14.5", "cluster": "ns/edge", "operation": "op-edge",
         "reason": "Job failed", "time": "2026-05-30T02:25:00Z", "until": "2026-05-30T06:00:00Z"},
    ]  # fmt: skip
    patcher = Patcher(api, clock=[NOW])
    await reconcile(patcher, api)
    assert api.writes
    fleet = api.fleet()
    assert fleet.halts == ()
    assert ("talos", "v1.14.6") in {(s.component, s.version) for s in fleet.seen}


async def test_a_fleet_that_cannot_be_read_afresh_starts_nothing(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    patcher = Patcher(api, clock=[NOW])

    async def down() -> tuple[d.FleetRun, ...]:
        raise TimeoutError

    monkeypatch.setattr(patcher, "_fleet_runs", down)
    result = await reconcile(patcher, api)
    assert reason(result) == "FleetBusy"
    assert "could not be counted" in (result.condition.message if result.condition else "")
    assert api.started == []
