"""What the Python package costs over the CLI, and how it scales on threads.

    python crates/ctxpress-py/bench/overhead.py [--cli target/release/ctxpress] [--corpus DIR] [--runs 3]

Run it with a release build of the package installed (`maturin develop --release`
or the wheel) and a release CLI. Prints medians of --runs runs, all in one run
of this script, as a Markdown table (docs/benchmarks.md keeps the last one):

- import: `import ctxpress` in a fresh interpreter;
- per file: the CLI on the whole JSONL (`--jobs 1`, process start included)
  against the package compressing each line (text in and out; dicts in and
  out), in MB/s, and the difference per conversation;
- threads: the same lines on 1, 2 and 4 Python threads sharing one Compressor.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

REPO = pathlib.Path(__file__).resolve().parents[3]


def median_time(f, runs):
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=str(REPO / "target/release/ctxpress"))
    ap.add_argument("--corpus", default=os.environ.get("CTXPRESS_CORPUS", str(REPO.parent / "shared/corpus")))
    ap.add_argument("--files", default="coding_agent_sessions.jsonl,taubench_airline.jsonl,swe_agent_trajs.jsonl")
    ap.add_argument("--preset", default="agent")
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()

    imp = statistics.median(
        float(
            subprocess.run(
                [sys.executable, "-c", "import time; t = time.perf_counter(); import ctxpress; print(time.perf_counter() - t)"],
                capture_output=True, text=True, check=True,
            ).stdout
        )
        for _ in range(max(a.runs, 5))
    )
    import ctxpress

    print(f"import ctxpress: {imp * 1000:.1f} ms (median of {max(a.runs, 5)})\n")
    print("| file | conversations | MB | CLI MB/s | Python text MB/s | Python dicts MB/s | extra per conversation (text / dicts) | 1 thread s | 2 threads | 4 threads |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    c = ctxpress.Compressor(a.preset)
    for name in a.files.split(","):
        path = pathlib.Path(a.corpus) / name
        if not path.exists():
            print(f"| {name} | (missing) |")
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        dicts = [json.loads(l) for l in lines]
        mb = path.stat().st_size / 1e6
        with tempfile.TemporaryDirectory() as d:
            out = pathlib.Path(d) / "out.jsonl"
            cli = median_time(
                lambda: subprocess.run([a.cli, "compress", "--preset", a.preset, "--jobs", "1", str(path), "-o", str(out)], check=True),
                a.runs,
            )
            cli_out = out.read_text(encoding="utf-8").splitlines()
        py_text = median_time(lambda: [c.compress(l) for l in lines], a.runs)
        py_dict = median_time(lambda: [c.compress(x) for x in dicts], a.runs)
        assert [c.compress(l).messages for l in lines] == cli_out, f"{name}: Python and CLI outputs differ"
        n = len(lines)
        threads = {}
        for k in (1, 2, 4):
            def run(k=k):
                with ThreadPoolExecutor(k) as ex:
                    list(ex.map(c.compress, lines))
            threads[k] = median_time(run, a.runs)
        print(
            f"| {name} | {n} | {mb:.2f} | {mb / cli:.1f} | {mb / py_text:.1f} | {mb / py_dict:.1f} | "
            f"{(py_text - cli) / n * 1000:+.2f} ms / {(py_dict - cli) / n * 1000:+.2f} ms | "
            f"{threads[1]:.2f} | {threads[1] / threads[2]:.2f}x | {threads[1] / threads[4]:.2f}x |"
        )


if __name__ == "__main__":
    main()
