"""talosctl's output of a read Job, read as untrusted input: documents by node, errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from ichor.api.talosoperation import OperationType
from ichor.cli import views
from ichor.controller.talosoperation import jobs, talosread
from ichor.settings import ExecutorSettings
from ichor.upgrade.node_images import NodeImage

SCHEMATIC = "d" * 64


def doc(node: str, type_: str, id_: str, spec: dict[str, Any]) -> str:
    """One resource as `talosctl get -o json` prints it (output/json.go: 4-space indent)."""
    body = {
        "node": node,
        "metadata": {"namespace": "runtime", "type": type_, "id": id_, "version": 1},
        "spec": spec,
    }
    return json.dumps(body, indent=4) + "\n"


def extension(node: str, index: int, name: str, version: str, author: str = "Sidero") -> str:
    return doc(
        node,
        "ExtensionStatuses.runtime.talos.dev",
        str(index),
        {
            "image": f"{index}.sqsh",
            "metadata": {"name": name, "version": version, "author": author, "description": ""},
        },
    )


def logs(*, missing: str | None = None, error: str = "") -> dict[str, str]:
    nodes = ["10.0.0.1", "10.0.0.2"]
    ext = extension("10.0.0.1", 0, "iscsi-tools", "v0.1.6") + extension(
        "10.0.0.1", 1, "schematic", SCHEMATIC, "Image Factory (https://factory.talos.dev)"
    )
    plat = "".join(
        doc(n, "PlatformMetadatas.talos.dev", "platformmetadata", {"platform": p})
        for n, p in zip(nodes, ["metal", "aws"], strict=True)
    )
    sec = "".join(
        doc(n, "SecurityStates.talos.dev", "securitystate", {"secureBoot": n == "10.0.0.2"})
        for n in nodes
        if n != missing
    )
    return {"extensions": ext, "platform": plat, "security": sec + error}


def test_each_node_is_read_from_its_own_documents() -> None:
    state = talosread.image_state(logs(), addresses=["10.0.0.1", "10.0.0.2"])
    assert state.problems == {}
    assert state.images == {
        "10.0.0.1": NodeImage(
            platform="metal",
            secure_boot=False,
            schematic=SCHEMATIC,
            factory="factory.talos.dev",
            extensions=("iscsi-tools",),
        ),
        "10.0.0.2": NodeImage(
            platform="aws", secure_boot=True, schematic=None, factory=None, extensions=()
        ),
    }


def test_a_node_missing_from_a_resources_output_is_unread_with_talosctls_words() -> None:
    error = "1 error occurred:\n\t* rpc error: code = Unavailable desc = connection refused\n\n"
    state = talosread.image_state(
        logs(missing="10.0.0.2", error=error), addresses=["10.0.0.1", "10.0.0.2"]
    )
    assert "10.0.0.2" not in state.images
    problem = state.problems["10.0.0.2"]
    assert problem.startswith("no securitystate (")
    assert "connection refused" in problem


def test_a_node_without_extensions_is_read_only_when_that_read_ended_cleanly() -> None:
    found = logs()
    found["extensions"] += "error: rpc error: code = Unavailable\n"
    state = talosread.image_state(found, addresses=["10.0.0.1", "10.0.0.2"])
    assert state.problems == {"10.0.0.2": "no extensions (error: rpc error: code = Unavailable)"}
    state = talosread.image_state(
        found, addresses=["10.0.0.1", "10.0.0.2"], exit_codes={"extensions": 0}
    )
    assert state.problems == {}
    state = talosread.image_state(
        logs(), addresses=["10.0.0.1", "10.0.0.2"], exit_codes={"extensions": 1}
    )
    assert set(state.problems) == {"10.0.0.2"}


def test_garbage_and_huge_logs_never_raise_and_read_nothing() -> None:
    for garbage in ["", "{", "{}{}", "[1,2]", "\x00" * 10, "{" * 100_000, '{"node": 5}', "ok\n"]:
        state = talosread.image_state(
            {"extensions": garbage, "platform": garbage, "security": garbage},
            addresses=["10.0.0.1"],
        )
        assert state.images == {}
        assert "10.0.0.1" in state.problems
    assert len(talosread.documents("x" * 100_000).errors) <= talosread.MAX_ERROR_CHARS


def test_a_schematic_whose_author_names_no_factory_is_unread() -> None:
    found = logs()
    found["extensions"] = extension("10.0.0.1", 0, "schematic", SCHEMATIC, "somebody")
    state = talosread.image_state(found, addresses=["10.0.0.1"])
    assert "names no Image Factory host" in state.problems["10.0.0.1"]


def test_a_platform_that_is_not_a_word_is_unread() -> None:
    found = logs()
    found["platform"] = doc("10.0.0.1", "PlatformMetadatas.talos.dev", "p", {"platform": "a/b"})
    state = talosread.image_state(found, addresses=["10.0.0.1"])
    assert state.problems["10.0.0.1"] == "its platformmetadata names no platform"


def test_the_status_groups_nodes_by_identical_image_largest_first() -> None:
    items = [{"metadata": {"name": f"n{i}", "annotations": {}}} for i in range(5)] + [
        {"metadata": {"name": "odd", "annotations": {talosread.SCHEMATIC_ANNOTATION: "e" * 64}}}
    ]
    metal = NodeImage(platform="metal", secure_boot=False, schematic=SCHEMATIC, factory="f")
    aws = NodeImage(platform="aws", secure_boot=False, schematic=SCHEMATIC, factory="f")
    state = talosread.ImageState(
        images={"a0": aws, "a1": metal, "a2": metal, "a3": metal, "odd": metal},
        problems={"a4": "no extensions (timeout)"},
    )
    addresses = {f"n{i}": f"a{i}" for i in range(5)} | {"odd": "odd"}
    readings = talosread.readings(items, state, addresses=addresses)
    status = talosread.node_image_status(readings, now=datetime(2026, 1, 1, tzinfo=UTC))
    assert status.summary == "2 images, 2 refused"
    assert status.differ is True
    assert [g.nodes for g in status.groups] == [("n1", "n2", "n3", "odd"), ("n0",)]
    assert status.unreadable[0] == "Node n4: no extensions (timeout)"
    assert "annotation extensions.talos.dev/schematic names eeeeeeeeeeee" in status.unreadable[1]


def test_ichor_status_shows_when_the_nodes_differ() -> None:
    body = {
        "metadata": {"name": "prod", "namespace": "team-a", "generation": 1},
        "spec": {"talosVersion": "v1.14.3", "kubernetesVersion": "v1.36.6",
                 "versionContract": "v1.14"},
        "status": {
            "nodeImages": {
                "summary": "2 images",
                "differ": True,
                "groups": [
                    {"platform": "metal", "schematic": SCHEMATIC, "factory": "factory.talos.dev",
                     "extensions": ["iscsi-tools"], "nodes": ["cp-1", "cp-2"]},
                    {"platform": "aws", "secureBoot": True, "schematic": SCHEMATIC,
                     "factory": "factory.corp", "nodes": ["gpu-1"]},
                ],
            }
        },
    }  # fmt: skip
    (row,) = views.status_rows([body])
    assert row.images == "2 images"
    assert row.image_lines == (
        f"metal, schematic {SCHEMATIC[:12]} (iscsi-tools): cp-1, cp-2",
        f"aws, SecureBoot, schematic {SCHEMATIC[:12]} of factory.corp (no extensions): gpu-1",
    )
    assert row.to_json()["nodeImages"]["summary"] == "2 images"
    same = {**body, "status": {"nodeImages": {"summary": "1 image", "differ": False}}}
    (row,) = views.status_rows([same])
    assert row.images == "1 image"
    assert row.image_lines == ()


# --- etcd, as an etcd check's output says --------------------------------------------------

CP = {"10.0.0.1": "cp-1", "10.0.0.2": "cp-2"}


def tab(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) + 3 for column in zip(header, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        return "".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    return "\n".join([line(header), *map(line, rows)]) + "\n"


def member(id_: str, address: str, learner: str = "false") -> list[str]:
    return [id_, f"https://{address}:2380", learner]


def etcd_output(
    lists: dict[str, list[list[str]]], statuses: dict[str, list[str]], error: str = ""
) -> talosread.ReadOutput:
    members = tab(
        ["NODE", "ID", "PEER URLS", "LEARNER"],
        [[node, *m] for node, ms in lists.items() for m in ms],
    )
    status = tab(
        ["NODE", "MEMBER", "LEADER", "LEARNER", "ERRORS"],
        [[node, *row] for node, row in statuses.items()],
    )
    return talosread.ReadOutput(logs={"members": error + members, "status": status})


BOTH = [member("a1", "10.0.0.1"), member("b2", "10.0.0.2")]
SOUND = {"10.0.0.1": ["a1", "a1", "false", ""], "10.0.0.2": ["b2", "a1", "false", ""]}


def test_etcd_health_is_healthy_with_every_member_answering() -> None:
    output = etcd_output({"10.0.0.1": BOTH, "10.0.0.2": BOTH}, SOUND)
    found = talosread.etcd_health(output, control_plane=CP)
    assert found.problems == ()
    assert found.members == 2


def test_etcd_health_names_a_node_that_does_not_answer_with_talosctls_words() -> None:
    output = etcd_output(
        {"10.0.0.1": BOTH}, {"10.0.0.1": SOUND["10.0.0.1"]}, error="error: 10.0.0.2 refused\n"
    )
    found = talosread.etcd_health(output, control_plane=CP)
    assert found.problems == ("etcd on cp-2 does not answer (error: 10.0.0.2 refused)",)
    # only cp-1's own member must be back after its upgrade
    assert talosread.etcd_health(output, control_plane=CP, only=("cp-1",)).healthy


def test_answers_yields_each_wanted_nodes_problem_in_order() -> None:
    found = list(
        talosread._answers(
            ["10.0.0.2", "10.0.0.1"],
            CP,
            members={"10.0.0.1"},
            statuses={"10.0.0.1": {"ERRORS": "boom"}},
            said="",
        )
    )
    assert found == ["etcd on cp-2 does not answer", "etcd on cp-1 reports: boom"]


def test_status_problems_error_before_leader_and_a_learner_besides() -> None:
    assert list(
        talosread._status_problems("cp-1", {"ERRORS": "alarm:NOSPACE", "LEARNER": "true"})
    ) == [
        "etcd on cp-1 reports: alarm:NOSPACE",
        "etcd on cp-1 is a learner, not yet a voting member",
    ]
    no_leader = {"LEADER": talosread.NO_LEADER}
    assert list(talosread._status_problems("cp-1", no_leader)) == ["etcd on cp-1 has no leader"]
    assert list(talosread._status_problems("cp-1", {"LEADER": ""})) == [
        "etcd on cp-1 has no leader"
    ]
    assert list(talosread._status_problems("cp-1", {"LEADER": "a1", "LEARNER": "false"})) == []


def test_member_lists_gathers_each_nodes_members() -> None:
    rows = [
        {"NODE": "10.0.0.1", "ID": "a1", "PEER URLS": "u1", "LEARNER": "false"},
        {"NODE": "10.0.0.1", "ID": "b2", "PEER URLS": "u2", "LEARNER": "true"},
        {"NODE": "10.0.0.2", "ID": "a1", "PEER URLS": "u1", "LEARNER": "false"},
    ]
    assert talosread._member_lists(rows) == {
        "10.0.0.1": {("a1", "u1", "false"), ("b2", "u2", "true")},
        "10.0.0.2": {("a1", "u1", "false")},
    }


def test_membership_finds_disagreement_strangers_learners_and_missing_members() -> None:
    def ids(*members: list[str]) -> set[tuple[str, str, str]]:
        return {(m[0], m[1], m[2]) for m in members}

    assert list(talosread._membership([], CP, wanted=list(CP), only=())) == []
    sound = ids(*BOTH)
    assert list(talosread._membership([sound, sound], CP, wanted=list(CP), only=())) == []
    other = ids(member("a1", "10.0.0.1"), member("z9", "10.9.9.9"))
    found = list(talosread._membership([other, sound], CP, wanted=list(CP), only=()))
    assert found == [
        "the control plane nodes list different etcd members",
        "etcd member at 10.9.9.9 is not a control plane node",
        "cp-2 is not an etcd member",
    ]
    learning = ids(member("a1", "10.0.0.1"), member("b2", "10.0.0.2", "true"))
    assert list(talosread._membership([learning], CP, wanted=list(CP), only=())) == [
        "etcd member of cp-2 is a learner"
    ]
    # after cp-1's upgrade, cp-2 still learning is not cp-1's to wait for
    assert list(talosread._membership([learning], CP, wanted=["10.0.0.1"], only=("cp-1",))) == []


def test_etcd_job_reads_members_and_status_of_every_control_plane_node() -> None:
    manifest = talosread.etcd_job(
        operation=jobs.OperationRef(
            namespace="ns", name="op", uid="u", cluster="c", type=OperationType.TALOS
        ),
        name="check-1",
        talos_version="v1.10.3",
        addresses=list(CP),
        talosconfig=jobs.SecretMount(secret="s", key="talosconfig"),
        settings=ExecutorSettings(),
    )
    args = {c["name"]: c["args"] for c in manifest["spec"]["template"]["spec"]["containers"]}
    assert args["members"][-4:] == ["etcd", "members", "--nodes", "10.0.0.1,10.0.0.2"]
    assert args["status"][-4:] == ["etcd", "status", "--nodes", "10.0.0.1,10.0.0.2"]


def test_unanswered_names_each_missing_resource_with_its_reads_errors() -> None:
    read = {name: talosread.documents(text) for name, text in logs(missing="10.0.0.2").items()}
    read["security"] = talosread.documents(logs(missing="10.0.0.2")["security"] + "error: nope")
    by_node = {name: docs.by_node() for name, docs in read.items()}
    assert talosread._unanswered("10.0.0.1", read, by_node, clean=True) is None
    assert (
        talosread._unanswered("10.0.0.2", read, by_node, clean=True)
        == "no securitystate (error: nope)"
    )
    # its extensions are missing too: read as none only from a clean read
    assert talosread._unanswered("10.0.0.2", read, by_node, clean=False) == (
        "no extensions, securitystate (error: nope)"
    )


def spec(value: dict[str, Any]) -> dict[str, Any]:
    return {"spec": value}


def factory_schematic(
    version: str = SCHEMATIC, author: str = "Image Factory (https://f.dev)"
) -> dict[str, Any]:
    return spec({"metadata": {"name": "schematic", "version": version, "author": author}})


@pytest.mark.parametrize(
    ("platform", "security", "extensions", "said"),
    [
        (spec({"platform": "not a word"}), spec({}), [], "names no platform"),
        (spec({}), spec({}), [], "names no platform"),
        (spec({"platform": "metal"}), spec({"secureBoot": "yes"}), [], "no readable secureBoot"),
        (
            spec({"platform": "metal"}),
            spec({}),
            [factory_schematic(author="Someone")],
            f"its schematic meta-extension ({SCHEMATIC[:12]}) names no Image Factory host",
        ),
        (
            spec({"platform": "metal"}),
            spec({}),
            [factory_schematic(version="XYZ")],
            "is not a schematic ID",
        ),
    ],
)
def test_node_image_says_why_a_node_is_unread(
    platform: dict[str, Any], security: dict[str, Any], extensions: list[Any], said: str
) -> None:
    found = talosread._node_image(platform, security, extensions)
    assert isinstance(found, str)
    assert said in found


def test_node_image_reads_platform_secure_boot_schematic_and_extensions() -> None:
    tools = spec({"metadata": {"name": "iscsi-tools", "version": "v1"}})
    found = talosread._node_image(
        spec({"platform": "equinix-metal"}),
        spec({"secureBoot": True}),
        [tools, factory_schematic()],
    )
    assert found == NodeImage(
        platform="equinix-metal",
        secure_boot=True,
        schematic=SCHEMATIC,
        factory="f.dev",
        extensions=("iscsi-tools",),
    )
