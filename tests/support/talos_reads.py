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


@dataclass
class PlayedReads:
    """Each node's image by address (``PLAIN`` for one not named), the nodes that do not
    answer (address -> talosctl's error), and the Jobs it answered for."""

    images: dict[str, NodeImage] = field(default_factory=dict)
    silent: dict[str, str] = field(default_factory=dict)
    answered: list[str] = field(default_factory=list)

    async def output(self, namespace: str, job: Mapping[str, Any]) -> talosread.ReadOutput:
        pod = job["spec"]["template"]["spec"]
        self.answered.append(str(job["metadata"]["name"]))
        logs: dict[str, str] = {}
        codes: dict[str, int] = {}
        for container in pod["containers"]:
            args = list(container["args"])
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
