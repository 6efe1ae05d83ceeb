"""The Headlamp plugin in headless Chromium against the real API server (docs/ui.md).

As nadia (no override verb): the Versions card, a refused version, the webhook's refusal
shown as the server worded it, and the override checkbox disabled with its reason. As
olivia (the verb): the tick, the plan with override, the create, and the Warning Event
the operator records on the cluster. The browser half is ui/headlamp/e2e/scenario.mjs;
this half sets the cluster up, serves the pages as each user and checks the server's
side. Screenshots go to ui/headlamp/build/screenshots (ignored by git);
`make ui-screenshots` writes them to docs/ui/ instead.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest

from ichor.api import records
from tests.component.operations.conftest import Objects
from tests.component.ui.conftest import HOLDER, PLAIN
from tests.harness import controlplane, headlamp

pytestmark = [pytest.mark.component, pytest.mark.asyncio(loop_scope="session")]

SCREENSHOTS = Path(
    os.environ.get("ICHOR_UI_SCREENSHOTS") or headlamp.PLUGIN / "build" / "screenshots"
)
#: The whole browser scenario; each of its steps has its own bound (30 s).
SCENARIO_TIMEOUT = 240.0
#: Where Headlamp's icon component fetches icons it was not given (never reached: the
#: browser resolves no name and the scenario aborts every non-loopback request).
ICON_APIS = {"https://api.iconify.design", "https://api.simplesvg.com", "https://api.unisvg.com"}
_DENIED = re.compile(r'admission webhook "[^"]+" denied the request: (.*)$', re.S)


async def run_scenario(arguments: dict[str, Any]) -> dict[str, Any]:
    """``node e2e/scenario.mjs``, bounded; its process group is killed on timeout."""
    process = await asyncio.create_subprocess_exec(
        "node", "e2e/scenario.mjs", json.dumps(arguments),
        cwd=headlamp.PLUGIN, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=controlplane.loopback_env(), start_new_session=True,
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(process.communicate(), SCENARIO_TIMEOUT)
    except TimeoutError:
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        raise AssertionError(
            f"the browser scenario did not end within {SCENARIO_TIMEOUT:.0f} s"
        ) from None
    lines = out.decode().strip().splitlines()
    assert lines, f"the scenario printed no report (exit {process.returncode}): {err.decode()}"
    report: dict[str, Any] = json.loads(lines[-1])
    assert report.get("ok"), f"{report.get('error')}\n{err.decode()[-2000:]}"
    return report


def server_refusal(
    plane: controlplane.ControlPlane, namespace: str, version: str, *, user: str
) -> str:
    """The webhook's sentence for the same plan, asked with kubectl as ``user``."""
    body = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosOperation",
        "metadata": {"generateName": "prod-kubernetes-", "namespace": namespace},
        "spec": {"clusterRef": {"name": "prod"}, "type": "kubernetes", "version": version},
    }
    result = plane.kubectl(
        "create", "--dry-run=server", "-f", "-", "--as", user,
        input=json.dumps(body), check=False,
    )  # fmt: skip
    assert result.returncode != 0, "the plan was expected to be refused"
    found = _DENIED.search(result.stderr.strip())
    assert found is not None, result.stderr
    return found[1]


def text(value: str) -> str:
    return " ".join(value.split())


async def test_a_refused_version_as_a_user_without_the_verb_then_as_a_holder(
    observed: Objects,
    users: dict[str, Path],
    control_plane: controlplane.ControlPlane,
    tmp_path: Path,
) -> None:
    namespace = observed.namespace
    await asyncio.to_thread(SCREENSHOTS.mkdir, parents=True, exist_ok=True)
    started = time.monotonic()
    async with (
        headlamp.serving(users[PLAIN]) as plain,
        headlamp.serving(users[HOLDER]) as holder,
    ):
        report = await run_scenario(
            {
                "plain": plain.url,
                "holder": holder.url,
                "namespace": namespace,
                "cluster": "prod",
                "screenshots": str(SCREENSHOTS),
                "failures": str(tmp_path),
            }
        )
    print(f"browser scenario: {time.monotonic() - started:.1f} s, steps (ms): "
          + ", ".join(f"{s['name']} {s['ms']}" for s in report["steps"]))  # fmt: skip

    # nadia saw the server's refusal as the server worded it, and could not override it
    version = report["plain"]["version"]
    assert text(report["plain"]["refusal"]) == text(
        server_refusal(control_plane, namespace, version, user=PLAIN)
    )
    assert "`override: true` on the TalosOperation would pass" in report["plain"]["refusal"]
    assert report["plain"]["reason"].startswith(
        "You do not hold the RBAC verb override on talosclusters.ichor.dev/prod "
        f"in namespace {namespace}"
    )
    assert report["plain"]["createDisabled"] is True
    plans = [p for m, p in plain.requests if m == "POST" and "/talosoperations?" in p]
    assert plans, plain.requests
    assert all(p.endswith("?dryRun=All") for p in plans), plans
    assert report["pickerGroups"][-1] == "Not offered"
    # a typed version that skips minors: a refusal no override passes, and no checkbox
    blocking = server_refusal(control_plane, namespace, "v1.99.0", user=PLAIN)
    assert text(report["plain"]["blockingRefusal"]) == text(blocking)
    assert "would pass" not in blocking
    assert report["plain"]["blockingCheckboxes"] == 0

    # olivia passed it: the plan's warning, one operation, and the Warning Event
    assert report["holder"]["version"] == version
    assert any(w.startswith(f"override by {HOLDER} (") for w in report["holder"]["planWarnings"])
    creates = [p for m, p in holder.requests if m == "POST" and p.endswith("/talosoperations?")]
    assert len(creates) == 1, holder.requests
    [operation] = cast(
        Any,
        await observed.custom.list_namespaced_custom_object(
            "ichor.dev", "v1alpha1", namespace, "talosoperations"
        ),
    )["items"]
    assert operation["spec"] == {
        "clusterRef": {"name": "prod"},
        "type": "kubernetes",
        "version": version,
        "override": True,
    }
    assert operation["metadata"]["annotations"][records.OVERRIDE_BY] == HOLDER
    assert operation["metadata"]["name"] in report["holder"]["created"]
    [event] = [e for e in await observed.events("prod") if e["reason"] == "Override"]
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "TalosCluster"
    assert HOLDER in event["message"]
    assert text(event["message"])[:60] in text(report["holder"]["event"])
    assert f"Kubernetes to {version}" in report["holder"]["operationRow"]

    # the fleet, accessibility, and nothing left the machine
    assert report["customResourcePage"].endswith(f"/c/test/ichor/clusters/{namespace}/prod")
    assert report["attention"] == "Patch updates are available for Talos, Kubernetes"
    assert report["axe"] == {"card": [], "dialog": [], "fleet": []}
    assert report["consoleErrors"] == []
    assert set(report["blocked"]) <= ICON_APIS, report["blocked"]
    for name in ("versions-card", "dialog-picker", "dialog-refused-without-verb",
                 "dialog-not-overridable", "dialog-override-holder",
                 "dialog-created", "cluster-after-override", "headlamp-custom-resource-page",
                 "fleet"):  # fmt: skip
        assert (SCREENSHOTS / f"{name}.png").stat().st_size > 1000


async def test_the_stand_in_acts_as_its_user_whatever_the_browser_sends(
    observed: Objects, users: dict[str, Path]
) -> None:
    """A page (or anything on the loopback) cannot become another user through the
    proxy: impersonation headers, a bearer token and cookies are dropped, so nadia's
    override is refused as nadia's and nothing is stored."""
    namespace = observed.namespace
    body = {
        "apiVersion": "ichor.dev/v1alpha1",
        "kind": "TalosOperation",
        "metadata": {"generateName": "prod-kubernetes-"},
        "spec": {
            "clusterRef": {"name": "prod"},
            "type": "kubernetes",
            "version": "v1.37.2",
            "override": True,
        },
    }
    forged = {
        "Impersonate-User": HOLDER,
        "Impersonate-Group": "system:masters",
        "Authorization": "Bearer not-a-token",
        "Cookie": "session=olivia",
    }
    async with headlamp.serving(users[PLAIN]) as plain, aiohttp.ClientSession() as session:
        api = f"{plain.url}/clusters/{headlamp.CLUSTER}/apis"
        path = f"{api}/ichor.dev/v1alpha1/namespaces/{namespace}/talosoperations"
        async with session.post(path, json=body, headers=forged) as answer:
            status, refusal = answer.status, (await answer.json())["message"]
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"group": "ichor.dev", "resource": "talosclusters",
                     "verb": "override", "namespace": namespace, "name": "prod"}},
        }  # fmt: skip
        async with session.post(
            f"{api}/authorization.k8s.io/v1/selfsubjectaccessreviews",
            json=review,
            headers=forged,
        ) as answer:
            allowed = (await answer.json())["status"]["allowed"]
    assert status == 403
    assert f"user '{PLAIN}' does not hold" in refusal
    assert allowed is False
    listed: Any = await observed.custom.list_namespaced_custom_object(
        "ichor.dev", "v1alpha1", namespace, "talosoperations"
    )
    assert listed["items"] == []
