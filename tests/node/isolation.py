"""What keeps the node's traffic inside the namespaces the harness creates, as rules: the
checks the cleanup test (its own node) and the network test (the shared one) share."""

from __future__ import annotations

from tests.harness import netns, node


def assert_backstops(namespace: netns.NetworkNamespace, tool: str) -> None:
    """The node's own ``mangle`` rules in ``tool``: FORWARD drops what leaves other than
    by the Pods' bridge; OUTPUT sends everything to the node's chain, which returns for
    lo, the node's link, the Pods' bridge and its veths and drops the rest."""
    forward = namespace.run(tool, "-t", "mangle", "-S", "FORWARD").stdout.splitlines()
    assert f"-A FORWARD ! -o {node.BRIDGE} -j DROP" in forward, forward
    output = namespace.run(tool, "-t", "mangle", "-S", "OUTPUT").stdout.splitlines()
    assert f"-A OUTPUT -j {node.OUTPUT_CHAIN}" in output, output
    chain = namespace.run(tool, "-t", "mangle", "-S", node.OUTPUT_CHAIN).stdout.splitlines()
    assert chain == [
        f"-N {node.OUTPUT_CHAIN}",
        f"-A {node.OUTPUT_CHAIN} -o lo -j RETURN",
        f"-A {node.OUTPUT_CHAIN} -o {node.DUMMY} -j RETURN",
        f"-A {node.OUTPUT_CHAIN} -o {node.BRIDGE} -j RETURN",
        f"-A {node.OUTPUT_CHAIN} -o veth+ -j RETURN",
        f"-A {node.OUTPUT_CHAIN} -j DROP",
    ], chain


def assert_no_masquerade_out(namespace: netns.NetworkNamespace) -> None:
    """The only MASQUERADE rules are kube-proxy's, in its KUBE-POSTROUTING chain and only
    for the packets it marked (0x4000: Service traffic that must come back through it,
    such as a Pod reaching itself through its own Service); those leave by the Pods'
    bridge, inside the namespace. The bridge plugin masquerades nothing (``ipMasq:
    false``: no CNI-* chain in nat), and nothing is there to masquerade towards: no route."""
    for tool in ("iptables", "ip6tables"):
        rules = namespace.run(tool, "-t", "nat", "-S").stdout.splitlines()
        masquerades = [rule for rule in rules if "-j MASQUERADE" in rule]
        for rule in masquerades:
            assert rule.startswith("-A KUBE-POSTROUTING "), rule
        if masquerades:
            # the chain returns first for every packet kube-proxy did not mark
            kube = [rule for rule in rules if rule.startswith("-A KUBE-POSTROUTING ")]
            assert "! --mark 0x4000/0x4000 -j RETURN" in kube[0], kube
        assert not [rule for rule in rules if " CNI-" in rule or rule.startswith("-N CNI-")]
        postrouting = [rule for rule in rules if rule.startswith("-A POSTROUTING")]
        assert all(" -j KUBE-POSTROUTING" in rule for rule in postrouting), postrouting
