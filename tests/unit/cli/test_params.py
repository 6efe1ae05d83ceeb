"""``--timeout`` durations and the form of a VERSION, refused in the project's words."""

from __future__ import annotations

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ichor.cli import params
from ichor.cli.main import main
from ichor.release.versions import VersionError, parse
from ichor.settings import CliSettings

#: What the tolerant semver parse says in its own words (blang/semver, Go's strconv).
PARSER_WORDS = ("Invalid character", "major number", "minor number", "patch number", "strconv")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30m", 1800.0),
        ("90s", 90.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("500ms", 0.5),
        ("2h0m5s", 7205.0),
    ],
)
def test_a_duration_is_read_as_kubectl_helm_and_flux_write_it(text: str, seconds: float) -> None:
    assert params.parse_duration(text) == (seconds, False)


def test_a_bare_number_is_seconds_and_says_so() -> None:
    assert params.parse_duration("45") == (45.0, True)


@pytest.mark.parametrize("text", ["", "soon", "30 m", "1h30", "m30", "-5m", "1d", "0s", "0", "h"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(params.DurationError):
        params.parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"), [(5400, "1h30m"), (90, "1m30s"), (1800, "30m"), (0.4, "0s"), (7200, "2h")]
)
def test_a_duration_is_printed_as_it_is_written(seconds: float, text: str) -> None:
    assert params.format_duration(seconds) == text


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv), settings=CliSettings(kubeconfig="/nonexistent/kubeconfig"))
    return code, capsys.readouterr().err


def test_a_timeout_that_is_no_duration_is_a_usage_error_naming_the_form(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, err = _run(capsys, "upgrade", "talos", "prod", "v1.14.5", "--wait", "--timeout", "soon")
    assert code == 2
    assert "Invalid value for '--timeout': 'soon' is not a duration such as 90s" in err


def test_a_bare_timeout_warns_before_anything_else_happens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the kubeconfig does not exist: the command stops there, after the option was read
    code, err = _run(capsys, "cni", "upgrade", "prod", "--wait", "--timeout", "600")
    assert code == 1
    assert "Warning: --timeout 600 is read as 10m; write a duration" in err
    assert "the kubeconfig /nonexistent/kubeconfig cannot be used" in err


@pytest.mark.parametrize(
    "text", ["0notaversion", "1.x", "", "abc", "v1.2.3.4", "1.2.3-\x01", "9" * 30]
)
def test_a_version_that_is_not_one_is_refused_in_the_projects_words(text: str) -> None:
    with pytest.raises(VersionError) as parsed:
        parse(text)
    assert any(words in str(parsed.value) for words in PARSER_WORDS) or text == "v1.2.3.4"
    with pytest.raises(click.BadParameter) as refused:
        params.version_form(text)
    message = refused.value.format_message()
    assert "is not a version: write vX.Y.Z, for example v1.14.3" in message
    assert not any(words in message for words in PARSER_WORDS), message


@given(st.text(max_size=40))
def test_no_text_makes_the_cli_speak_the_parsers_words(text: str) -> None:
    try:
        form = params.version_form(text)
    except click.BadParameter as error:
        message = error.format_message()
        assert not any(words in message for words in PARSER_WORDS), message
    else:
        assert form.startswith("v")


@pytest.mark.parametrize(
    "argv",
    [
        ("upgrade", "talos", "prod", "0notaversion"),
        ("upgrade", "kubernetes", "prod", "1.x"),
        ("upgrade", "plan", "prod", "--talos", "0notaversion"),
        ("upgrade", "plan", "prod", "--kubernetes", "v1.36.x"),
    ],
)
def test_the_commands_refuse_a_version_in_the_projects_words(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...]
) -> None:
    code, err = _run(capsys, *argv)
    assert code == 2
    assert "is not a version: write vX.Y.Z, for example v1.14.3" in err
    assert not any(words in err for words in PARSER_WORDS), err
