"""The commit a bench ran on, recorded in its results file so that a figure can be traced to its
code (bench/git-commit.mjs is the same for the Node benches). None where the tree is not a git
checkout (a copy of the tree sent to a GPU machine)."""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def head_commit():
    try:
        sha = _git("rev-parse", "--short", "HEAD")
        # Changed tracked files mean the figures are not quite that commit's.
        return f"{sha}+uncommitted" if _git("status", "--porcelain", "--untracked-files=no") else sha
    except (OSError, subprocess.CalledProcessError):
        return None
