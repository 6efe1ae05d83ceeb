"""What the machine snapshot (tests/harness/machine.py) counts as a change left by a run.

The node tier fails its teardown on any change, so what is allowed must be said: a kernel
module the kernel loaded for the node's own namespace (the bridge, veth, overlay and the
netfilter family) stays loaded and is not a change; any other module, br_netfilter
among them, and a sysctl key that was not there before, are.
"""

from __future__ import annotations

from dataclasses import replace

from tests.harness import machine


def _snapshot(
    *, sysctls: dict[str, str] | None = None, modules: tuple[str, ...] | None = ()
) -> machine.Snapshot:
    return machine.Snapshot(
        sysctls=sysctls if sysctls is not None else {"kernel/panic": "0\n"},
        iptables="",
        ip6tables="",
        links=["lo"],
        mounts=["/"],
        cgroups=[],
        paths={},
        modules=modules,
    )


def test_the_same_machine_is_no_change() -> None:
    before = _snapshot(modules=("ext4",))
    assert before.diff(replace(before)) == []


def test_a_new_sysctl_key_is_a_change() -> None:
    before = _snapshot()
    after = _snapshot(sysctls={"kernel/panic": "0\n", "net/ipv4/vs/amemthresh": "1024\n"})
    assert before.diff(after) == ["new sysctl net/ipv4/vs/amemthresh: '1024'"]


def test_a_key_that_went_away_is_not_the_runs_change() -> None:
    before = _snapshot(sysctls={"kernel/panic": "0\n", "net/ipv4/conf/veth9/forwarding": "0\n"})
    assert before.diff(_snapshot()) == []


def test_a_module_loaded_for_the_nodes_namespace_is_allowed_with_its_keys() -> None:
    before = _snapshot(modules=("ext4",))
    after = _snapshot(
        sysctls={"kernel/panic": "0\n", "net/netfilter/nf_conntrack_max": "65536\n"},
        modules=("ext4", "veth", "bridge", "stp", "llc", "nf_conntrack", "xt_mark", "overlay"),
    )
    assert before.diff(after) == []
    assert before.allowed_modules(after) == [
        "bridge", "llc", "nf_conntrack", "overlay", "stp", "veth", "xt_mark",
    ]  # fmt: skip


def test_br_netfilter_and_its_keys_are_a_change() -> None:
    """It would send the machine's own bridged traffic through iptables."""
    before = _snapshot(modules=("bridge",))
    after = _snapshot(
        sysctls={"kernel/panic": "0\n", "net/bridge/bridge-nf-call-iptables": "1\n"},
        modules=("bridge", "br_netfilter"),
    )
    assert before.diff(after) == [
        "new sysctl net/bridge/bridge-nf-call-iptables: '1'",
        "module loaded: br_netfilter",
    ]


def test_a_module_unloaded_meanwhile_is_not_the_runs_change() -> None:
    assert _snapshot(modules=("ext4", "veth")).diff(_snapshot(modules=("ext4",))) == []


def test_a_kernel_without_loadable_modules_has_nothing_to_compare() -> None:
    """No /proc/modules (everything built in): ``modules`` is None on both sides."""
    assert _snapshot(modules=None).diff(_snapshot(modules=None)) == []
