"""The executor's read Jobs, played where no kubelet runs them (the component tier).

A read Job's containers run ``talosctl get <resource> --nodes <addresses> -o json``; the
node tier runs them for real against the Talos API stand-in. Here ``PlayedReads`` answers
the executor's ``read_output`` seam with what talosctl would print for the Job's own
arguments, in talosctl's format (cmd/talosctl/cmd/talos/output/json.go: one indented
JSON document per resource, its ``node`` the address as given), from what the test says
each node runs. A node the test makes silent prints nothing, and its container exits 1
with talosctl's multierror line, as a node that does not answer does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ichor.controller.talosoperation import talosread
from ichor.upgrade.node_images import PLAIN_SCHEMATIC, NodeImage

#: A node the Image Factory built from its plain schematic (no extensions): what a node
#: not named runs. Its ``schematic`` meta-extension is its one ExtensionStatus.
PLAIN = NodeImage(
    platform="metal", secure_boot=False, schematic=PLAIN_SCHEMATIC, factory="factory.talos.dev"
)


def _doc(address: str, type_: str, id_: str, spec: Mapping[str, Any]) -> str:
    body = {
        "node": address,
        "metadata": {"namespace": "runtime", "type": type_, "id": id_, "version": 1},
        "spec": dict(spec),
    }
    return json.dumps(body, indent=4) + "\n"


def printed(resource: str, address: str, image: NodeImage) -> str:
    """What ``talosctl get <resource> -o json`` prints for one node running ``image``."""
    spec: dict[str, Any]
    if resource == "platformmetadata":
        spec = {"platform": image.platform, "hostname": address}
        return _doc(address, "PlatformMetadatas.talos.dev", "platformmetadata", spec)
    if resource == "securitystate":
        spec = {"secureBoot": image.secure_boot, "bootedWithUKI": image.secure_boot}
        return _doc(address, "SecurityStates.talos.dev", "securitystate", spec)
    layers = [(name, "v1.0.0", "Sidero Labs") for name in image.extensions]
    if image.schematic:
        factory = f"Image Factory (https://{image.factory or 'factory.talos.dev'})"
        layers.append(("schematic", image.schematic, factory))
    return "".join(
        _doc(
            address,
            "ExtensionStatuses.runtime.talos.dev",
            str(index),
            {
                "image": f"{index}.sqsh",
                "metadata": {"name": name, "version": version, "author": author},
            },
        )
        for index, (name, version, author) in enumerate(layers)
    )


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A table as talosctl prints it (text/tabwriter, padding 3)."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, *rows]]  # fmt: skip
    return "\n".join(lines) + "\n"


def _member_id(address: str) -> str:
    return f"{abs(hash(address)) % (1 << 60):016x}"


@dataclass
class PlayedReads:
    """Each node's image by address (``PLAIN`` for one not named), the nodes that do not
    answer (address -> talosctl's error), and the Jobs it answered for."""

    images: dict[str, NodeImage] = field(default_factory=dict)
    silent: dict[str, str] = field(default_factory=dict)
    answered: list[str] = field(default_factory=list)
    #: etcd of the control plane nodes (by address): a member whose etcd does not answer,
    #: and one that reports errors (``talosctl etcd status``'s ERRORS column).
    etcd_down: set[str] = field(default_factory=set)
    etcd_errors: dict[str, str] = field(default_factory=dict)

    def _etcd(self, what: str, addresses: list[str]) -> tuple[str, int]:
        """``talosctl etcd members|status --nodes ...`` (cmd/talosctl/cmd/talos/etcd.go)."""
        up = [a for a in addresses if a not in self.etcd_down]
        leader = _member_id(up[0]) if up else "0000000000000000"
        if what == "members":
            rows = [
                [node, _member_id(a), f"host-{a}", f"https://{a}:2380", f"https://{a}:2379",
                 "false"]
                for node in up for a in up
            ]  # fmt: skip
            text = _table(
                ["NODE", "ID", "HOSTNAME", "PEER URLS", "CLIENT URLS", "LEARNER"], rows
            ) if rows else ""  # fmt: skip
        else:
            rows = [
                [a, _member_id(a), "24 MB", "11 MB (45.83%)", leader, "1000", "2", "1000",
                 "false", "3.6.0", "3.6.0", self.etcd_errors.get(a, "")]
                for a in up
            ]  # fmt: skip
            header = ["NODE", "MEMBER", "DB SIZE", "IN USE", "LEADER", "RAFT INDEX",
                      "RAFT TERM", "RAFT APPLIED INDEX", "LEARNER", "PROTOCOL", "STORAGE",
                      "ERRORS"]  # fmt: skip
            text = _table(header, rows) if rows else ""
        down = [a for a in addresses if a in self.etcd_down]
        for address in down:
            text += f"WARNING: {address}: rpc error: code = Unavailable desc = connection refused\n"
        return text, 0 if up else 1

    async def output(self, namespace: str, job: Mapping[str, Any]) -> talosread.ReadOutput:
        pod = job["spec"]["template"]["spec"]
        self.answered.append(str(job["metadata"]["name"]))
        logs: dict[str, str] = {}
        codes: dict[str, int] = {}
        for container in pod["containers"]:
            args = list(container["args"])
            if args[0] == "etcd":
                addresses = args[args.index("--nodes") + 1].split(",")
                logs[container["name"]], codes[container["name"]] = self._etcd(args[1], addresses)
                continue
            resource = args[1]
            addresses = args[args.index("--nodes") + 1].split(",")
            text, errors = "", []
            for address in addresses:
                if address in self.silent:
                    errors.append(self.silent[address])
                    continue
                text += printed(resource, address, self.images.get(address, PLAIN))
            if errors:
                text += f"{len(errors)} error(s) occurred:\n" + "".join(
                    f"\t* {e}\n" for e in errors
                )
            logs[container["name"]] = text
            codes[container["name"]] = 1 if errors else 0
        return talosread.ReadOutput(logs=logs, exit_codes=codes)
