"""``intake.shape_problem`` as a chain: the envelope, then each named request check in
order; each check alone refuses what it is for, and the first problem found wins."""

from __future__ import annotations

from typing import Any

import pytest

from ichor.webhook import intake
from tests.unit.webhook.test_intake import review


def request() -> dict[str, Any]:
    body: dict[str, Any] = review(operation="UPDATE")["request"]
    return body


def test_the_checks_run_in_their_order() -> None:
    assert (
        intake._uid_problem,
        intake._resource_problem,
        intake._kind_problem,
        intake._operation_problem,
        intake._user_problem,
        intake._bodies_problem,
        intake._subresource_problem,
    ) == intake.REQUEST_CHECKS


def test_a_well_formed_request_passes_every_check() -> None:
    for check in intake.REQUEST_CHECKS:
        assert check(request()) is None, check.__name__
    assert intake.shape_problem(review()) is None


@pytest.mark.parametrize(
    ("envelope", "problem"),
    [
        ([], "the body is not a JSON object"),
        (
            {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"},
            "expected apiVersion",
        ),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "request is missing"),
        (
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": []},
            "request is missing or not an object",
        ),
    ],
)
def test_the_envelope_is_checked_first(envelope: object, problem: str) -> None:
    found = intake.shape_problem(envelope)
    assert found is not None
    assert found.startswith(problem)


def test_uid_problem() -> None:
    assert intake._uid_problem({}) == "request.uid is missing"
    assert intake._uid_problem({"uid": ""}) == "request.uid is missing"
    assert intake._uid_problem({"uid": 7}) == "request.uid is missing"
    long = "u" * (intake.MAX_UID + 1)
    found = intake._uid_problem({"uid": long})
    assert found is not None
    assert f"more than the {intake.MAX_UID} of a UID" in found
    assert intake._uid_problem({"uid": "u" * intake.MAX_UID}) is None


@pytest.mark.parametrize("key", ["group", "version", "resource"])
def test_resource_problem(key: str) -> None:
    body = request()
    body["resource"] = {**body["resource"], key: None}
    assert intake._resource_problem(body) == (
        "request.resource must name group, version and resource"
    )
    assert intake._resource_problem({"resource": "talosclusters"}) is not None


@pytest.mark.parametrize("key", ["group", "version", "kind"])
def test_kind_problem(key: str) -> None:
    body = request()
    body["kind"] = {**body["kind"], key: 1}
    assert intake._kind_problem(body) == "request.kind must name group, version and kind"
    assert intake._kind_problem({"kind": ["TalosCluster"]}) is not None


def test_operation_problem() -> None:
    assert intake._operation_problem({"operation": None}) == "request.operation is missing"
    assert intake._operation_problem({"operation": "CREATE"}) is None


def test_user_problem() -> None:
    assert intake._user_problem({"userInfo": "alice"}) == "request.userInfo is missing"
    assert intake._user_problem({"userInfo": {}}) is None


def test_bodies_problem() -> None:
    assert intake._bodies_problem({}) == "request.object and request.oldObject are both missing"
    assert intake._bodies_problem({"oldObject": []}) == "request.oldObject must be an object"
    assert intake._bodies_problem({"object": {"metadata": None}}) == (
        "request.object.metadata must be an object"
    )
    assert intake._bodies_problem({"object": {"metadata": {"name": 1}}}) == (
        "request.object.metadata.name must be a string"
    )
    assert intake._bodies_problem({"oldObject": {}}) is None


def test_subresource_problem() -> None:
    assert intake._subresource_problem({"subResource": 3}) == (
        "request.subResource must be a string"
    )
    found = intake._subresource_problem({"subResource": ""})
    assert found is not None
    assert found.startswith("request.subResource is empty")
    assert intake._subresource_problem({"subResource": "status"}) is None
    assert intake._subresource_problem({}) is None


def test_the_first_problem_in_order_wins() -> None:
    body = review()
    del body["request"]["uid"]
    del body["request"]["userInfo"]
    body["request"]["subResource"] = ""
    assert intake.shape_problem(body) == "request.uid is missing"
    body["request"]["uid"] = "u-1"
    assert intake.shape_problem(body) == "request.userInfo is missing"
    body["request"]["userInfo"] = {}
    found = intake.shape_problem(body)
    assert found is not None
    assert found.startswith("request.subResource is empty")
