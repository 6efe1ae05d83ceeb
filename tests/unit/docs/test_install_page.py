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
