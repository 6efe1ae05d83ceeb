"""A rolling update of the operator, on the node, while the API server keeps calling the
webhook: no review reaches a Pod that cannot answer it.

The webhook's ``failurePolicy`` is Fail, so a review that reaches a Pod whose listener is
not open yet, or one that has closed it, refuses the write ("failed calling webhook").
Four writers send server-side dry runs of a TalosCluster create (each one review of the
mutating and one of the validating webhook, through the chart's Service) from before
``helm upgrade`` starts a new Pod until after the old one is gone; every one must be
answered. The new Pod is Ready only once its listener serves (the readiness endpoint);
the old one drains before it stops (preStop: unready, connections closed after each
answer, then SIGTERM).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.component.chart import helm
from tests.node.conftest import RELEASE, OnNode, run_helm, wait_available
from tests.node.conftest import record as record_figure

pytestmark = pytest.mark.timeout(1200)

WRITERS = 4
#: Seconds the writers go on once the old Pod is gone (a late Service change shows here).
AFTER = 3.0

CLUSTER = {
    "apiVersion": "ichor.dev/v1alpha1",
    "kind": "TalosCluster",
    "metadata": {"generateName": "rollout-"},
    "spec": {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6", "versionContract": "v1.14"},
}


@dataclass
class Writers:
    """Threads that dry-run a create until told to stop, counting what came back."""

    kubeconfig: str
    answered: int = 0
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    threads: list[threading.Thread] = field(default_factory=list)

    def _write(self) -> None:
        api = config.new_client_from_config(config_file=self.kubeconfig)  # type: ignore[no-untyped-call]
        custom = client.CustomObjectsApi(api)
        try:
            while not self.stop.is_set():
                started = time.monotonic()
                try:
                    custom.create_namespaced_custom_object(
                        "ichor.dev", "v1alpha1", "default", "talosclusters", CLUSTER,
                        dry_run="All", _request_timeout=30,
                    )  # fmt: skip
                    outcome = None
                except ApiException as error:
                    outcome = f"{error.status}: {str(error.body)[:300]}"
                with self.lock:
                    if outcome is None:
                        self.answered += 1
                    else:
                        self.failures.append(f"after {time.monotonic() - started:.2f} s {outcome}")
        finally:
            api.close()

    def start(self) -> None:
        for index in range(WRITERS):
            thread = threading.Thread(target=self._write, name=f"writer-{index}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)


def _names(on_node: OnNode) -> set[str]:
    return {p["metadata"]["name"] for p in on_node.pods()}


def _all_pods(on_node: OnNode) -> set[str]:
    """Every Pod of the release, terminating ones too."""
    listed = json.loads(
        on_node.kubectl(
            "get", "pods", "-n", on_node.namespace, "-l", "app.kubernetes.io/name=ichor",
            "-o", "json",
        ).stdout
    )["items"]  # fmt: skip
    return {p["metadata"]["name"] for p in listed}


def test_a_rolling_update_sends_no_review_to_a_pod_that_cannot_answer_it(
    on_node: OnNode,
) -> None:
    old = _names(on_node)
    writers = Writers(kubeconfig=str(on_node.cluster.kubeconfig))
    writers.start()
    try:
        time.sleep(2.0)
        with writers.lock:
            assert writers.answered > 0, writers.failures[:5]
            before = writers.answered
        started = time.monotonic()
        run_helm(
            on_node.cluster, "upgrade", RELEASE, str(helm.CHART), "-n", on_node.namespace,
            "-f", str(on_node.values_file),
            "--set", f"podAnnotations.ichor\\.dev/rollout={uuid.uuid4().hex[:8]}",
        )  # fmt: skip
        wait_available(on_node.cluster, on_node.namespace)
        deadline = time.monotonic() + 180
        while _all_pods(on_node) & old:  # the old Pod drains, then stops
            assert time.monotonic() < deadline, "the old Pod did not go away"
            time.sleep(0.5)
        rolled = time.monotonic() - started
        time.sleep(AFTER)
    finally:
        writers.finish()
    new = _names(on_node)
    assert new, "no Pod after the rollout"
    assert not new & old, (old, new)
    record_figure(
        "rolling update",
        f"{rolled:.1f} s, {writers.answered} reviews answered ({writers.answered - before} "
        f"during it), {len(writers.failures)} refused",
    )
    assert writers.failures == [], "\n".join(writers.failures[:20])
    assert writers.answered - before >= 20
