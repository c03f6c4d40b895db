"""The README's Python blocks run as written (the Ray Data one needs `ray` and
is only compiled; the LiteLLM and LangChain ones skip without their framework,
and fail then when CI is set), and its build commands name files that exist."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from _support import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```", README, flags=re.S | re.M)


# Frameworks a block may need (the extras of pyproject.toml).
FRAMEWORKS = ("litellm", "langchain")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def test_python_blocks_run(tmp_path):
    ran, missing = 0, []
    # LiteLLM fetches its model cost map from GitHub on import unless told not to.
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    for lang, body in BLOCKS:
        if lang != "python":
            continue
        compile(body, "README.md", "exec")
        if re.search(r"^import ray\b", body, flags=re.M):
            continue
        needs = [f for f in FRAMEWORKS if re.search(rf"^(import|from) {f}\b", body, flags=re.M)]
        absent = [f for f in needs if not _installed(f)]
        if absent:
            missing += absent
            continue
        out = subprocess.run(
            [sys.executable, "-c", body], cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env
        )
        assert out.returncode == 0, f"README block failed:\n{body}\n{out.stderr}"
        ran += 1
    assert ran >= 1, "the README has a runnable Python example"
    if missing:
        extras = ",".join(missing)
        why = f"README blocks not run: {', '.join(missing)} not installed (pip install 'ctxpress[{extras}]')"
        if os.environ.get("CI"):
            pytest.fail(f"{why} (CI is set: they must run)")
        pytest.skip(why)


def test_build_commands_name_real_files():
    cmds = [l for lang, body in BLOCKS if lang == "sh" for l in body.splitlines() if "maturin" in l]
    assert cmds, "the README says how to build the Python package"
    for c in cmds:
        for path in re.findall(r"-m (\S+)", c):
            assert (REPO / path).is_file(), c
