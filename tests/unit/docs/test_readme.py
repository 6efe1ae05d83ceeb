"""The README stays short and starts with the two commands; the reference is in docs/."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def test_the_readme_is_short() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move reference text to docs/"


def test_the_two_commands_come_first() -> None:
    text = README.read_text()
    head = text[: text.index("\n## ")]
    assert "make demo" in head
    assert "make test" in head


def _install_section() -> str:
    text = README.read_text()
    start = text.index("\n## Install")
    return text[start : text.index("\n## ", start + 1)]


def test_the_install_section_says_who_each_write_is_judged_as_and_how_to_lock_the_port() -> None:
    section = _install_section()
    assert "rules.md#which-identity-each-write-is-judged-as" in section
    assert "judged as" in section
    # a wildcard role holds the verb: an admin granting it must know
    assert '`verbs: ["*"]`' in section
    assert "`override`" in section
    # mutual TLS: how, in one line, and where the rest is
    assert "webhook.clientAuth.enabled=true" in section
    assert "install.md#mutual-tls-only-the-api-server-may-call-the-webhook" in section
    assert "networkPolicy.webhook.cidrs" in section
