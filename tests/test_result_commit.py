"""A result's commit is the project's own: a copy of the checkout without .git, inside another git
repository, records EGGNOG_COMMIT or "unknown", never the enclosing repository's commit."""

import shutil
import subprocess

from bench.report import REPO, commit


def git(*args, cwd):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_the_checkout_records_its_own_head(monkeypatch):
    monkeypatch.delenv("EGGNOG_COMMIT", raising=False)
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()
    assert commit().split("-")[0] == head


def test_a_copy_inside_another_repository_does_not_take_its_commit(tmp_path, monkeypatch):
    outer = tmp_path / "outer"
    copy = outer / "copy"
    copy.mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    git("init", "-q", cwd=outer)
    git("-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "--allow-empty", "-m", "outer", cwd=outer)
    monkeypatch.delenv("EGGNOG_COMMIT", raising=False)
    assert commit(copy) == "unknown"
    monkeypatch.setenv("EGGNOG_COMMIT", "0123456789ab")  # said by whoever made the copy: it wins
    assert commit(copy) == commit(tmp_path) == commit() == "0123456789ab"
