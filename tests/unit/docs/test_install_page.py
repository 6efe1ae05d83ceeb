"""The README's install line is the install page's, which the chart tests run."""

from __future__ import annotations

from tests.component.chart import readme


def test_the_readme_installs_as_the_install_page_says() -> None:
    assert readme.readme_command("helm install ") == readme.command("helm install ")


def test_the_install_page_holds_every_command_the_chart_tests_run() -> None:
    assert readme.command("helm install ")[:3] == ["helm", "install", "ichor"]
    flags = readme.set_flags("helm upgrade ichor charts/ichor")
    assert ("--set", "webhook.clientAuth.enabled=true") in flags
    assert any(f == "--set-file" and v.startswith("webhook.clientAuth.caBundle=") for f, v in flags)
    assert "--clusterrole=ichor-override" in readme.command("kubectl create clusterrolebinding")
    assert readme.command("kubectl auth can-i override")[:4] == [
        "kubectl",
        "auth",
        "can-i",
        "override",
    ]


def _admission_plugins() -> set[str]:
    """The plugins the install page's kube-apiserver AdmissionConfiguration configures."""
    import re

    import yaml

    page = (readme.ROOT / "docs" / "install.md").read_text()
    for block in re.findall(r"```yaml\n(.*?)```", page, re.S):
        for document in yaml.safe_load_all(block):
            if isinstance(document, dict) and document.get("kind") == "AdmissionConfiguration":
                return {plugin["name"] for plugin in document["plugins"]}
    raise AssertionError("docs/install.md shows no AdmissionConfiguration")


def test_the_admission_configuration_presents_the_certificate_to_every_webhook_kind() -> None:
    """The chart installs a Validating and a Mutating configuration: with mutual TLS on,
    kube-apiserver must present its client certificate to both, or every write the
    mutating half sees is refused."""
    template = (readme.ROOT / "charts" / "ichor" / "templates" / "webhook.yaml").read_text()
    kinds = {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"}
    assert all(kind in template for kind in kinds)
    assert _admission_plugins() == {"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"}
