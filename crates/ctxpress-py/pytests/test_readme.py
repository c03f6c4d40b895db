"""The README's Python blocks run as written (the Ray Data one needs `ray` and
is only compiled), and its build commands name files that exist."""

from __future__ import annotations

import re
import subprocess
import sys

from _support import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w+)\n(.*?)^```", README, flags=re.S | re.M)


def test_python_blocks_run(tmp_path):
    ran = 0
    for lang, body in BLOCKS:
        if lang != "python":
            continue
        compile(body, "README.md", "exec")
        if re.search(r"^import ray\b", body, flags=re.M):
            continue
        out = subprocess.run([sys.executable, "-c", body], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"README block failed:\n{body}\n{out.stderr}"
        ran += 1
    assert ran >= 1, "the README has a runnable Python example"


def test_build_commands_name_real_files():
    cmds = [l for lang, body in BLOCKS if lang == "sh" for l in body.splitlines() if "maturin" in l]
    assert cmds, "the README says how to build the Python package"
    for c in cmds:
        for path in re.findall(r"-m (\S+)", c):
            assert (REPO / path).is_file(), c
