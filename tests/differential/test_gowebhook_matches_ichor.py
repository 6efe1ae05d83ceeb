"""The Go webhook of tests/gotools refuses exactly what Ichor's decision function refuses.

The benchmark holds Ichor's webhook against a minimal controller-runtime webhook in Go
(tests/gotools/gowebhook) deciding the same TalosCluster rule from the same table
(tests/gotools/compat.json). That comparison is only fair if both decide alike, so every
review of ``admission_cases.corpus()`` (several thousand) and a few hundred generated
ones go to both: the Go program over HTTPS, Ichor's ``judgement.cluster_answer`` in this
process with a backend that grants the override verb to nobody (the Go webhook grants no
override). Compared: allowed or not, the HTTP code (403 a rule, 400 an unreadable
review), and for a rule's refusal the rule's name. The sentences differ on purpose.

The corpus must reach every rule and both answers, or the comparison proves nothing
(asserted). A last test changes one number of the table the Go program reads and sees
its verdict move: it decides from the file, not from a copy of its own.
"""

from __future__ import annotations

import http.client
import json
import re
import ssl
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ichor.webhook import decisions, judgement, reviews
from tests.differential import admission_cases
from tests.fixtures.fuzzing import figure, tally
from tests.harness import certs
from tests.support import compat_export, gowebhook
from tests.unit.webhook.fakes import FakeBackend, stamped

# (allowed, HTTP code, rule of a 403 or "")
Verdict = tuple[bool, int, str]
_RULE = re.compile(r"\(rule (\w+)\)")


class GoClient:
    """One keep-alive HTTPS connection to the Go webhook."""

    def __init__(self, webhook: gowebhook.GoWebhook) -> None:
        context = ssl.create_default_context(cafile=str(webhook.files.ca))
        self._connection = http.client.HTTPSConnection(
            "127.0.0.1", webhook.port, context=context, timeout=10
        )

    def verdict(self, review: dict[str, Any]) -> Verdict:
        self._connection.request(
            "POST",
            gowebhook.PATH,
            body=json.dumps(review),
            headers={"Content-Type": "application/json"},
        )
        response = self._connection.getresponse()
        body = json.loads(response.read())
        assert response.status == 200, body
        answer = body["response"]
        assert answer["uid"] == review["request"]["uid"]
        if answer["allowed"]:
            return (True, 200, "")
        status = answer.get("status") or {}
        code = int(status.get("code", 0))
        found = _RULE.search(status.get("message", ""))
        return (False, code, found.group(1) if found and code == 403 else "")

    def close(self) -> None:
        self._connection.close()


def _decided_rule(request: dict[str, Any]) -> str:
    """The rule behind Ichor's 403 for a user without the verb: the first refusal no
    override passes, else the first (what ``answer_cluster`` shows)."""
    new = reviews.cluster_versions(request.get("object"), where="object")
    old = (
        reviews.cluster_versions(request.get("oldObject"), where="oldObject")
        if request.get("operation") == "UPDATE"
        else None
    )
    verdict = decisions.review_cluster(new=new, old=old)
    refusal = verdict.blocking or verdict.overridable[0]
    return str(refusal.rule)


async def _mutated(request: dict[str, Any]) -> Any:
    """The object as the API server hands it to the validating half: after Ichor's
    mutating half wrote the admission records the write adds (an unmanaged step past a
    Cilium the rule would refuse adds one; the Go webhook has no records to write)."""
    new = request.get("object")
    if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
        return new
    old = request.get("oldObject")
    return await stamped(
        new,
        old=old if isinstance(old, dict) else None,
        userinfo=request.get("userInfo") or {},
        operation=str(request.get("operation")),
        backend=FakeBackend(),
    )


async def ichor_verdict(review: dict[str, Any]) -> Verdict:
    request = review["request"]
    answer = await judgement.cluster_answer(
        new=await _mutated(request),
        old=request.get("oldObject"),
        userinfo=request.get("userInfo"),
        operation=request.get("operation"),
        dryrun=bool(request.get("dryRun")),
        backend=FakeBackend(),
    )
    assert answer.code != decisions.Code.UNAVAILABLE, f"Ichor could not decide: {answer.message}"
    if answer.allowed:
        return (True, 200, "")
    rule = _decided_rule(request) if answer.code == decisions.Code.FORBIDDEN else ""
    return (False, int(answer.code), rule)


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> certs.ServingFiles:
    return certs.write_serving_certificate(tmp_path_factory.mktemp("gowebhook-tls"))


@pytest.fixture(scope="module")
def go(serving: certs.ServingFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GoClient]:
    with gowebhook.running(files=serving, workdir=tmp_path_factory.mktemp("gowebhook")) as hook:
        client = GoClient(hook)
        try:
            yield client
        finally:
            client.close()


def _summary(review: dict[str, Any]) -> str:
    request = review["request"]
    return json.dumps(
        {
            "operation": request.get("operation"),
            "object": request.get("object"),
            "oldObject": request.get("oldObject"),
        }
    )[:400]


async def test_every_review_of_the_corpus_gets_the_same_verdict(go: GoClient) -> None:
    corpus = admission_cases.corpus()
    mismatches: list[str] = []
    seen: Counter[str] = Counter()
    for index, review in enumerate(corpus):
        ours, theirs = await ichor_verdict(review), go.verdict(review)
        seen["allowed" if ours[0] else (ours[2] or f"code {ours[1]}")] += 1
        if ours != theirs:
            mismatches.append(f"#{index}: Ichor {ours}, Go {theirs}: {_summary(review)}")
    figure(
        f"gowebhook differential: {len(corpus):,} reviews, same verdict for "
        f"{len(corpus) - len(mismatches):,}; "
        + ", ".join(f"{k} {v:,}" for k, v in sorted(seen.items()))
    )
    assert not mismatches, f"{len(mismatches)} of {len(corpus)} differ:\n" + "\n".join(
        mismatches[:25]
    )
    # The corpus reaches both answers and every rule, or it proves nothing.
    for outcome in (
        "allowed",
        "Form",
        "Downgrade",
        "TalosKubernetes",
        "CiliumKubernetes",
        "UnknownVersion",
        "CniPreset",
        "UnreadableVersion",
        "code 400",
    ):
        assert seen[outcome] >= 10, f"the corpus reaches {outcome!r} {seen[outcome]} times: {seen}"


_text = st.one_of(
    st.sampled_from(
        admission_cases.TALOS
        + admission_cases.KUBERNETES
        + admission_cases.FORMLESS
        + ["v1.14", "v1.13"]
    ),
    st.text(max_size=12),
)
_value = st.one_of(
    _text, st.none(), st.booleans(), st.integers(-3, 3), st.lists(st.integers(0, 1), max_size=1)
)
_cni = st.one_of(
    _value,
    st.fixed_dictionaries(
        {}, optional={"preset": st.one_of(_value, st.sampled_from(["cilium", " Cilium", "none"]))}
    ),
)
_status = st.one_of(
    _value,
    st.fixed_dictionaries(
        {},
        optional={
            "cni": st.one_of(
                _value,
                st.fixed_dictionaries(
                    {},
                    optional={
                        "detected": st.one_of(_value, st.sampled_from(admission_cases.DETECTED)),
                        "detectedVersion": st.one_of(
                            _value, st.sampled_from(admission_cases.CILIUM)
                        ),
                    },
                ),
            )
        },
    ),
)
_body = st.fixed_dictionaries(
    {
        "metadata": st.one_of(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["prod", ""])}, optional={"generateName": _value}
            ),
            _value,
        ),
        "spec": st.one_of(
            st.fixed_dictionaries(
                {"talosVersion": _text, "kubernetesVersion": _text, "versionContract": _text},
                optional={"cni": _cni},
            ),
            st.fixed_dictionaries(
                {},
                optional={
                    "talosVersion": _value,
                    "kubernetesVersion": _value,
                    "versionContract": _value,
                },
            ),
        ),
    },
    optional={"status": _status},
)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(new=_body, old=st.one_of(st.none(), _body), username=st.sampled_from(["alice", ""]))
async def test_generated_reviews_get_the_same_verdict(
    go: GoClient, new: dict[str, Any], old: dict[str, Any] | None, username: str
) -> None:
    review = admission_cases.review(new, old, username=username)
    with tally("gowebhook differential (generated reviews)"):
        assert await ichor_verdict(review) == go.verdict(review), _summary(review)


def _table(tmp_path: Path, edit: Any) -> Path:
    data = compat_export.export()
    edit(data)
    path = tmp_path / "compat.json"
    path.write_text(json.dumps(data))
    return path


async def test_the_go_webhook_decides_from_the_table_it_is_given(
    serving: certs.ServingFiles, tmp_path: Path
) -> None:
    """Narrow Cilium 1.20 to Kubernetes 1.35 in the file: a step to 1.36 Ichor allows is
    then refused by the Go webhook, by the Cilium rule."""
    body = admission_cases.cluster(kubernetes="v1.36.7", cilium="1.20.4")
    old = admission_cases.cluster(kubernetes="v1.36.6", cilium="1.20.4")
    review = admission_cases.review(body, old)
    assert await ichor_verdict(review) == (True, 200, "")

    def narrow(data: dict[str, Any]) -> None:
        (entry,) = [e for e in data["cilium_kubernetes"] if e["cilium"] == [1, 20]]
        entry["high"] = [1, 35]

    with gowebhook.running(
        files=serving, workdir=tmp_path / "run", table=_table(tmp_path, narrow)
    ) as hook:
        client = GoClient(hook)
        try:
            assert client.verdict(review) == (False, 403, "CiliumKubernetes")
        finally:
            client.close()


def test_a_table_of_another_format_stops_the_go_webhook_at_start(
    serving: certs.ServingFiles, tmp_path: Path
) -> None:
    table = _table(tmp_path, lambda data: data.__setitem__("format", 99))
    with (
        pytest.raises(gowebhook.GoWebhookError, match=r"format 99, this program reads format 1"),
        gowebhook.running(files=serving, workdir=tmp_path / "run", table=table),
    ):
        pass
