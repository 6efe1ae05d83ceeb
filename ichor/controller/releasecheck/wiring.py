"""kopf registration of the release check, and nothing else: start and stop the check's
task (``check``) and hand it the watch events of the IchorInstallation singleton. The
decisions are pure (``decisions``); the listing and the status write are the check's.
"""

from __future__ import annotations

from typing import Any

import kopf

from ichor.api import kinds
from ichor.controller import running
from ichor.controller.releasecheck.check import ReleaseCheck
from ichor.kube.clients import operator_client
from ichor.settings import Settings

#: The memo keys of the running check and of settings a caller may pass in.
RELEASE_CHECK = "ichor_release_check"
SETTINGS = "ichor_release_check_settings"


async def stop(memo: kopf.Memo, **_: Any) -> None:
    await running.stop(memo, RELEASE_CHECK, ReleaseCheck)


async def installation_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    check = memo.get(RELEASE_CHECK)
    if isinstance(check, ReleaseCheck):
        check.installation_event(event.get("type"), event["object"])


def register(registry_: kopf.OperatorRegistry, *, settings: Settings) -> None:
    """Put the release check's handlers into ``registry_``; ``settings`` are the
    operator's, a ``SETTINGS`` memo entry wins for the check's own part."""

    async def start(memo: kopf.Memo, **_: Any) -> None:
        check = ReleaseCheck(
            api=await operator_client(kube=settings.kube),
            settings=running.part(memo, SETTINGS, settings.release_check),
        )
        check.start()
        memo[RELEASE_CHECK] = check

    kopf.on.startup(id="releasecheck-start", registry=registry_)(start)
    kopf.on.cleanup(id="releasecheck-stop", registry=registry_)(stop)
    running.watch(
        registry_,
        kinds.Plural.ICHOR_INSTALLATIONS,
        installation_event,
        id="releasecheck-installation",
    )
