"""The client layer maps each HTTP status once, to a typed error that is still the
client's ApiException; and no controller and no webhook module writes a status, a merge patch or
an Event with the client itself."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from kubernetes.aio.client.exceptions import ApiException

import ichor
from ichor.kube import errors, events

PACKAGE = Path(ichor.__file__).resolve().parent

#: The client's calls that write what the client layer writes.
WRITES = {
    "patch_namespaced_custom_object",
    "patch_namespaced_custom_object_status",
    "patch_cluster_custom_object",
    "patch_cluster_custom_object_status",
    "create_namespaced_event",
    "create_namespaced_event_without_preload_content",
}


def _error(status: int | None, body: object = None) -> ApiException:
    error = ApiException(status=status, reason="Reason")
    error.body = json.dumps(body) if body is not None else None
    return error


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (401, errors.Unauthorized),
        (403, errors.Forbidden),
        (404, errors.NotFound),
        (409, errors.Conflict),
        (422, errors.Invalid),
        (500, errors.ServerError),
        (503, errors.ServerError),
        (400, errors.ApiError),
        (410, errors.ApiError),
        (None, errors.ApiError),
    ],
)
def test_each_status_has_one_typed_error_that_is_still_an_api_exception(
    status: int | None, kind: type[errors.ApiError]
) -> None:
    original = _error(status, {"message": "m"})
    typed = errors.typed(original)
    assert type(typed) is kind
    assert isinstance(typed, ApiException)
    assert (typed.status, typed.reason, typed.body) == (status, "Reason", original.body)
    assert errors.typed(typed) is typed


@pytest.mark.parametrize(
    ("status", "refused"),
    [(400, True), (403, True), (409, True), (410, True), (429, True), (500, False), (None, False)],
)
def test_a_4xx_is_refused_and_keeps_its_status_and_message(
    status: int | None, refused: bool
) -> None:
    typed = errors.typed(_error(status, {"message": "the server's words"}))
    assert typed.refused is refused
    assert (typed.status, typed.message) == (status, "the server's words")


def test_the_message_is_the_servers_or_the_status() -> None:
    denial = 'admission webhook "x" denied the request: refused by rule Y'
    assert errors.message(_error(403, {"message": denial})) == denial
    assert errors.message(_error(409)) == "409 Reason"
    assert errors.message(_error(500, ["not", "an", "object"])) == "500 Reason"
    garbage = _error(502)
    garbage.body = "\ufffd<html>"  # the client decodes a body, undecodable bytes replaced
    assert errors.message(garbage) == "502 Reason"


def test_a_best_effort_post_swallows_one_set_and_nothing_else() -> None:
    assert set(events.POST_FAILURES) == {ApiException, *errors.TRANSIENT}
    assert OSError in errors.TRANSIENT  # ssl.SSLError and refused connections
    assert not issubclass(ValueError, events.POST_FAILURES)


def _writes(path: Path, *, root: Path = PACKAGE.parent) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr in WRITES
    ]


def test_no_controller_writes_with_the_client_itself() -> None:
    """The operator's code (controllers, webhook); the ``ichor`` command speaks through
    the synchronous client of its own layer, ``ichor/cli/kube.py``."""
    found = [
        where
        for folder in ("controller", "webhook")
        for path in sorted((PACKAGE / folder).rglob("*.py"))
        for where in _writes(path)
    ]
    assert found == []
    assert _writes(PACKAGE / "kube" / "patching.py") != []
    assert _writes(PACKAGE / "kube" / "events.py") != []


def test_the_scan_sees_a_write(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("async def f(objects):\n    await objects.patch_namespaced_custom_object()\n")
    assert [w.split()[-1] for w in _writes(sample, root=tmp_path)] == [
        "patch_namespaced_custom_object"
    ]
