"""The PySpark example (examples/python/spark_batch.py) against the CLI.

Runs the example's Spark path in local[2] on corpus files and checks that its
JSONL output is byte-identical to ``ctxpress compress --preset agent INPUT -o
OUT`` (with and without ``--budget``), in input order, and that it counts the
conversations that do not fit the budget as the CLI does. Prints the Spark
run's conversations per second (shown with ``pytest -s``).

Needs: java on PATH, pyspark + pandas + pyarrow, the CLI binary (env
CTXPRESS_BIN, else <repo>/target/debug/ctxpress, else target/release), the
corpus (env CTXPRESS_CORPUS, else ../shared/corpus beside the repo). Each
missing piece is a visible skip with its reason (``pytest -rs``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "python" / "spark_batch.py"
EXAMPLE_DATA = REPO / "examples" / "data"

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)

if shutil.which("java") is None:
    pytest.skip("Spark tests: `java` is not on PATH (Spark needs Java 17)", allow_module_level=True)
for _mod in ("pyspark", "pandas", "pyarrow"):
    try:
        __import__(_mod)
    except ImportError as _e:
        pytest.skip(
            f"Spark tests: {_mod} is not importable ({_e}); "
            "pip install pyspark pandas pyarrow",
            allow_module_level=True,
        )

#: Conversations/s of each Spark run, printed at the end of the module.
RATES: list = []


def _load_example():
    spec = importlib.util.spec_from_file_location("spark_batch", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["spark_batch"] = mod
    spec.loader.exec_module(mod)
    return mod


spark_batch = _load_example()


def _corpus_dir() -> Path:
    env = os.environ.get("CTXPRESS_CORPUS")
    return Path(env) if env else REPO.parent / "shared" / "corpus"


def _cli_bin() -> Path:
    env = os.environ.get("CTXPRESS_BIN")
    if env:
        if not Path(env).is_file():
            pytest.skip(f"CTXPRESS_BIN={env} does not exist")
        return Path(env)
    for p in (REPO / "target" / "debug" / "ctxpress", REPO / "target" / "release" / "ctxpress"):
        if p.is_file():
            return p
    pytest.skip(
        "no ctxpress CLI binary (set CTXPRESS_BIN or `cargo build -p ctxpress-cli`): "
        f"looked for {REPO}/target/debug/ctxpress and target/release/ctxpress"
    )


@pytest.fixture(scope="module")
def corpus() -> Path:
    d = _corpus_dir()
    if not d.is_dir():
        pytest.skip(f"corpus folder {d} is absent (set CTXPRESS_CORPUS to the corpus folder)")
    return d


def _corpus_file(corpus: Path, name: str) -> Path:
    p = corpus / name
    if not p.is_file():
        pytest.skip(f"corpus file {p} is absent (set CTXPRESS_CORPUS to the corpus folder)")
    return p


@pytest.fixture(scope="module")
def cli() -> Path:
    return _cli_bin()


@pytest.fixture(scope="module")
def spark():
    t = time.perf_counter()
    session = spark_batch.build_session("local[2]", app_name="ctxpress-pytest")
    started = time.perf_counter() - t
    conf = session.conf
    assert conf.get("spark.ui.enabled") == "false"
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.sql.shuffle.partitions") == "2"
    # Start the Python workers (pandas, pyarrow, ctxpress imported) once, so
    # the conversations/s of the runs below are not the workers' start-up.
    t = time.perf_counter()

    def warm(batches):
        import ctxpress  # noqa: F401

        yield from batches

    session.range(2, numPartitions=2).mapInPandas(warm, "id long").collect()
    print(
        f"\nspark: session {started:.1f} s, Python workers warm-up "
        f"{time.perf_counter() - t:.1f} s"
    )
    yield session
    session.stop()
    if RATES:
        total_rows = sum(n for _, n, _ in RATES)
        total_s = sum(s for _, _, s in RATES)
        print(
            f"\nspark rows/s report: {total_rows} conversations in {total_s:.1f} s over "
            f"{len(RATES)} runs = {total_rows / total_s:.1f} conversations/s "
            "(local[2], after the workers' warm-up; includes reading and writing)"
        )


def run_cli(cli: Path, src: Path, out: Path, budget=None):
    """The CLI's output bytes and how many conversations it says do not fit."""
    cmd = [str(cli), "compress", "--preset", "agent", str(src), "-o", str(out)]
    if budget is not None:
        cmd += ["--budget", str(budget)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 3), f"{cmd} exited {p.returncode}: {p.stderr}"
    m = re.search(r"(\d+) of \d+ conversations do not fit", p.stderr)
    not_fitting = int(m.group(1)) if m else 0
    assert (p.returncode == 3) == (not_fitting > 0), p.stderr
    return out.read_bytes(), not_fitting


def run_spark(spark, src: Path, out: Path, **kw):
    t = time.perf_counter()
    figures = spark_batch.compress_jsonl(spark, str(src), str(out), **kw)
    seconds = time.perf_counter() - t
    n = figures["conversations"]
    RATES.append((src.name, n, seconds))
    label = f"{src.name} " + " ".join(f"{k}={v}" for k, v in kw.items())
    print(f"spark: {label}: {n} conversations in {seconds:.2f} s = {n / seconds:.1f} conversations/s")
    return figures


def read_parts(out: Path, ext: str = ".txt"):
    parts = sorted(p for p in out.iterdir() if p.name.startswith("part-") and p.name.endswith(ext))
    assert parts, f"no part files in {out}: {sorted(os.listdir(out))}"
    assert (out / "_SUCCESS").exists()
    return parts


@pytest.mark.parametrize(
    "name,budget",
    [
        ("swe_agent_trajs.jsonl", None),
        ("taubench_airline.jsonl", None),
        ("swe_agent_trajs.jsonl", 8000),
        ("taubench_airline.jsonl", 8000),
        # Conversations cannot fit 1000 tokens (taubench's system prompt alone
        # is about 1,450): the CLI exits 3 and says how many.
        ("taubench_airline.jsonl", 1000),
    ],
)
def test_spark_matches_cli(cli, corpus, spark, tmp_path, name, budget):
    src = _corpus_file(corpus, name)
    expected, cli_not_fitting = run_cli(cli, src, tmp_path / "cli.jsonl", budget)
    out = tmp_path / "spark"
    figures = run_spark(spark, src, out, preset="agent", budget=budget)
    parts = read_parts(out)
    assert len(parts) == 1, parts
    got = parts[0].read_bytes()
    assert got.count(b"\n") == expected.count(b"\n")
    assert got == expected, f"Spark output differs from the CLI's on {name} (budget={budget})"
    assert figures["conversations"] == expected.count(b"\n")
    assert figures["not_fitting"] == cli_not_fitting
    if budget == 1000:
        assert cli_not_fitting > 0, "the budget case meant to exercise 'does not fit' fits"


def test_spark_many_parts_keep_order(cli, corpus, spark, tmp_path):
    """Several output files: read in name order, they are the input order."""
    src = _corpus_file(corpus, "taubench_airline.jsonl")
    expected, _ = run_cli(cli, src, tmp_path / "cli.jsonl")
    out = tmp_path / "spark"
    run_spark(spark, src, out, preset="agent", parts=3, partitions=3)
    parts = read_parts(out)
    assert len(parts) > 1, parts
    assert b"".join(p.read_bytes() for p in parts) == expected


def test_spark_blank_lines_pass_through(cli, spark, tmp_path):
    """Blank and whitespace-only lines come out as the CLI writes them (as is)."""
    lines = (EXAMPLE_DATA / "swe_agent.jsonl").read_text(encoding="utf-8").splitlines()
    src = tmp_path / "with_blanks.jsonl"
    src.write_text(
        "\n".join([lines[0], "", "   ", lines[1], lines[2]]) + "\n", encoding="utf-8"
    )
    expected, _ = run_cli(cli, src, tmp_path / "cli.jsonl")
    out = tmp_path / "spark"
    figures = run_spark(spark, src, out, preset="agent")
    assert b"".join(p.read_bytes() for p in read_parts(out)) == expected
    assert figures["conversations"] == 3


def test_spark_parquet(cli, corpus, spark, tmp_path):
    """--format parquet: one row per line, in input order, with report figures."""
    import pyarrow.parquet as pq

    src = _corpus_file(corpus, "swe_agent_trajs.jsonl")
    expected, _ = run_cli(cli, src, tmp_path / "cli.jsonl")
    out = tmp_path / "spark"
    run_spark(spark, src, out, preset="agent", fmt="parquet")
    tables = [pq.read_table(p) for p in read_parts(out, ".parquet")]
    rows = [r for t in tables for r in t.to_pylist()]
    assert [r["position"] for r in rows] == sorted(r["position"] for r in rows)
    got = "".join(r["conversation"] + "\n" for r in rows).encode("utf-8")
    assert got == expected
    assert all(r["tokens_after"] <= r["tokens_before"] for r in rows)
    assert all(r["fits"] for r in rows)


def test_spark_command_line(cli, spark, tmp_path, capsys):
    """The script's command line (argparse, summary line, exit codes) on the
    example data shipped in the repo, with the module's session (a second
    JVM for ``python spark_batch.py ...`` would cost ~30 s)."""
    src = EXAMPLE_DATA / "taubench_airline.jsonl"
    expected, _ = run_cli(cli, src, tmp_path / "cli.jsonl")
    out = tmp_path / "spark"
    code = spark_batch.main([str(src), str(out), "--preset", "agent"], spark=spark)
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert re.search(
        r"^12 conversations, \d+ -> \d+ tokens, .* conversations/s\) -> ", printed.out, re.M
    ), printed.out
    assert b"".join(q.read_bytes() for q in read_parts(out)) == expected

    # A budget some conversations cannot meet: exit 3 and the CLI's count.
    expected, not_fitting = run_cli(cli, src, tmp_path / "cli-budget.jsonl", budget=1000)
    assert not_fitting > 0
    code = spark_batch.main([str(src), str(out), "--budget", "1000"], spark=spark)
    printed = capsys.readouterr()
    assert code == 3
    assert f"error: {not_fitting} of 12 conversations do not fit the budget" in printed.err
    assert b"".join(q.read_bytes() for q in read_parts(out)) == expected
    assert spark.range(3).count() == 3, "main() stopped the session it was given"
