"""hack/hooks/commit-msg, the check ``make hooks`` installs: a subject of at most 72
characters, then a blank line before any body."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HOOKS = ROOT / "hack" / "hooks"
HOOK = HOOKS / "commit-msg"


def check(tmp_path: Path, message: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(HOOK), str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )


@pytest.mark.parametrize(
    "message",
    [
        "Add the commit-msg hook\n",
        "x" * 72 + "\n",
        "Split the webhook server by concern\n\nThe file held four concerns.\n",
        # git's template: comments and the scissors' diff are stripped after the hook
        "Short subject\n\n# Please enter the commit message\n# " + "y" * 90 + "\n",
        "Short subject\n# ------------------------ >8 ------------------------\n" + "z" * 99,
        "\n\nSubject after blank lines\n\n\n",
        "",
    ],
)
def test_a_message_within_the_rule_passes(tmp_path: Path, message: str) -> None:
    result = check(tmp_path, message)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""


def test_a_subject_of_73_characters_is_refused_with_its_length(tmp_path: Path) -> None:
    result = check(tmp_path, "x" * 73 + "\n\nwhy\n")
    assert result.returncode == 1
    assert "the subject is 73 characters, over the limit of 72" in result.stderr
    assert "--no-verify" in result.stderr


def test_a_body_without_a_blank_line_is_refused(tmp_path: Path) -> None:
    result = check(tmp_path, "Short subject\nbody right below it\n")
    assert result.returncode == 1
    assert "the line after the subject is not blank" in result.stderr


def test_both_problems_are_named(tmp_path: Path) -> None:
    result = check(tmp_path, "s" * 100 + "\nbody\n")
    assert result.returncode == 1
    assert "100 characters" in result.stderr
    assert "not blank" in result.stderr


def test_a_commented_long_line_does_not_count_as_the_subject(tmp_path: Path) -> None:
    result = check(tmp_path, "# " + "c" * 100 + "\n" + "q" * 80 + "\n")
    assert result.returncode == 1
    assert "80 characters" in result.stderr


def test_the_hook_is_executable_and_make_hooks_points_git_at_it() -> None:
    assert os.access(HOOK, os.X_OK)
    makefile = (ROOT / "Makefile").read_text()
    assert "git config core.hooksPath hack/hooks" in makefile
    assert "make hooks" in (ROOT / "docs" / "development.md").read_text()


def test_git_runs_the_hook_and_refuses_a_long_subject(tmp_path: Path) -> None:
    git = shutil.which("git")
    assert git is not None, "git is not installed (apt-get install git)"
    repo = tmp_path / "repo"
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
    }

    def git_in_repo(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [git, "-C", str(repo), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
            env=env,
        )

    repo.mkdir()
    assert git_in_repo("init", "-q").returncode == 0
    assert git_in_repo("config", "core.hooksPath", str(HOOKS)).returncode == 0
    refused = git_in_repo("commit", "-q", "--allow-empty", "-m", "w" * 80)
    assert refused.returncode != 0
    assert "80 characters" in refused.stderr
    assert git_in_repo("rev-parse", "--verify", "-q", "HEAD").returncode != 0
    taken = git_in_repo("commit", "-q", "--allow-empty", "-m", "A short subject", "-m", "Why.")
    assert taken.returncode == 0, taken.stderr
