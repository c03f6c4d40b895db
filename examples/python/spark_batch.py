"""Compress a JSONL corpus of conversations with PySpark and ctxpress.

One conversation a line in, one compressed conversation a line out, in input
order: the output of the JSONL format is byte for byte what
``ctxpress compress --preset PRESET [--budget N] INPUT -o OUT`` writes (read
the part files in name order; with ``--parts 1``, the default, there is one).

How it works, and what a cluster user would reuse:

1. ``spark.read.text`` keeps every line exactly as it is (no JSON parsing by
   Spark, so fields ctxpress does not know, key order and number spelling
   survive); each line gets its position with ``monotonically_increasing_id``
   right after the read, before anything moves rows between partitions (the
   ids grow with the file's order: partition index in the high bits, row in
   the low bits).
2. ``repartition(N)`` spreads the rows so all executors' cores compress (a
   small file is one input split, i.e. one task).
3. ``mapInPandas`` runs :func:`compress_partition` once per partition: it
   builds one :class:`ctxpress.Compressor` there (the configuration is parsed
   once per task, not once per row; a Compressor is not pickled from the
   driver), then calls ``compress_many`` on each Arrow batch with JSON text in
   and JSON text out (``str`` in, ``str`` out: no dict round trip in Python).
   ``jobs=1`` because Spark already runs one task per core; more threads per
   task would oversubscribe the executor.
4. ``repartitionByRange(parts, "idx").sortWithinPartitions("idx")`` puts the
   rows back in input order: part file k holds the k-th range of lines, each
   sorted, so concatenating the part files in name order gives the input
   order. This scales: with ``--parts 1`` the one sorted partition is written
   by one task (fine for a corpus that fits one worker's disk), and for a large
   corpus ``--parts 64`` writes 64 ordered files in parallel. We do not
   ``collect()`` to the driver (that only works for small outputs) and do not
   ``orderBy(...).coalesce(1)`` (coalesce does not promise to keep a global
   sort).

Blank lines are passed through unchanged, as the CLI does. Lines ending in
CRLF come out with LF (Spark's text reader drops the line terminator), so only
LF input is byte-identical to the CLI. A line that is not a conversation fails
its task with a ``ctxpress.InputError`` naming the input line.

``--format parquet`` writes Parquet instead: the compressed conversation as
text (column ``conversation``), the row's ``position`` (sorting by it gives
the input order; it is not the line number) and the report figures per row
(``tokens_before``, ``tokens_after``, ``messages_before``, ``messages_after``,
``fits``), in input order as above.

Run (no network; Java 17, the ctxpress package (crates/ctxpress-py) and
``pip install pyspark pandas pyarrow``)::

    python examples/python/spark_batch.py examples/data/taubench_airline.jsonl /tmp/out
    python examples/python/spark_batch.py IN.jsonl OUT_DIR --preset agent \\
        --budget 8000 --master 'local[2]'
    cat /tmp/out/part-*.txt > compressed.jsonl

Exit code 3, as the CLI's, when a budget was given and some conversation
could not be brought under it (the output is written all the same).

Ray Data does the same with ``map_batches``: read the file with
``ray.data.read_text(path)`` (one row per line, column ``text``), then
``ds.map_batches(CompressBatch, fn_constructor_kwargs={"preset": "agent"},
batch_format="pandas", concurrency=N)`` where ``CompressBatch`` is a class
whose ``__init__`` builds one ``ctxpress.Compressor`` per actor and whose
``__call__(self, df)`` returns ``df.assign(text=[r.messages for r in
self.c.compress_many(list(df["text"]), jobs=1)])``; Ray Data keeps the row
order of ``read_text`` when ``ctx.execution_options.preserve_order = True``
(``ray.data.DataContext.get_current()``), and ``ds.write_json``/``write_parquet``
writes the result. As with Spark, build the Compressor in the worker, not on the
driver.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Iterator, Optional

#: The columns mapInPandas gives back (Spark DDL).
OUTPUT_SCHEMA = (
    "idx long, value string, tokens_before long, tokens_after long, "
    "messages_before long, messages_after long, fits boolean"
)

_SHIPPED_TO: set = set()


def build_session(master: str = "local[2]", app_name: str = "ctxpress-spark-batch"):
    """A SparkSession for the example: quiet, its UI off, listening on
    127.0.0.1 only (drop those settings on a real cluster)."""
    # The Python workers must be able to import ctxpress: use this interpreter.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master.startswith("local"):
        # Bind the driver and its block manager to the loopback interface only.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    if master.startswith("local"):
        builder = (
            builder.config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.ui.showConsoleProgress", "false")
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def compress_partition(
    batches: Iterator["pandas.DataFrame"],
    preset: str = "agent",
    budget: Optional[int] = None,
) -> Iterator["pandas.DataFrame"]:
    """mapInPandas body: one Compressor per partition, compress_many per batch.

    Each batch has columns ``idx`` (position) and ``value`` (a JSONL line)."""
    import pandas as pd

    import ctxpress

    compressor = ctxpress.Compressor(preset, budget=budget)
    for df in batches:
        lines = df["value"].tolist()
        # The CLI passes blank lines through; ctxpress.compress("") is an InputError.
        todo = [i for i, line in enumerate(lines) if line.strip()]
        try:
            results = compressor.compress_many([lines[i] for i in todo], jobs=1)
        except ctxpress.InputError:
            # compress_many names the item within this batch; find it again one
            # by one to name the row's position instead.
            for i in todo:
                try:
                    compressor.compress(lines[i])
                except ctxpress.InputError as e:
                    raise ctxpress.InputError(
                        f"row idx {int(df['idx'].iloc[i])}: {e}"
                    ) from None
            raise
        out = list(lines)
        tb = [0] * len(lines)
        ta = [0] * len(lines)
        mb = [0] * len(lines)
        ma = [0] * len(lines)
        fits = [True] * len(lines)
        for i, r in zip(todo, results):
            out[i] = r.messages
            rep = r.report
            tb[i], ta[i] = rep["tokens_before"], rep["tokens_after"]
            mb[i], ma[i] = rep["messages_before"], rep["messages_after"]
            fits[i] = r.fits
        yield pd.DataFrame(
            {
                "idx": df["idx"],
                "value": out,
                "tokens_before": tb,
                "tokens_after": ta,
                "messages_before": mb,
                "messages_after": ma,
                "fits": fits,
            }
        )


def compress_jsonl(
    spark,
    input_path: str,
    output_dir: str,
    *,
    preset: str = "agent",
    budget: Optional[int] = None,
    fmt: str = "jsonl",
    parts: int = 1,
    partitions: Optional[int] = None,
) -> dict:
    """Compress every line of ``input_path`` into ``output_dir`` (overwritten).

    Returns figures: ``conversations``, ``not_fitting``, ``tokens_before``,
    ``tokens_after``, ``seconds``."""
    from pyspark.sql import functions as F

    started = time.perf_counter()
    sc = spark.sparkContext
    if __name__ != "__main__" and id(sc) not in _SHIPPED_TO:
        # Imported (by a job of yours, or the tests): the workers unpickle
        # compress_partition by module name, so ship this file to them (once
        # per SparkContext). Run as a script, Spark pickles __main__'s
        # functions by value instead.
        sc.addPyFile(os.path.abspath(__file__))
        _SHIPPED_TO.add(id(sc))
    lines = spark.read.text(input_path, wholetext=False)
    # Position first, while the rows are still in file order.
    indexed = lines.select(F.monotonically_increasing_id().alias("idx"), "value")
    n = partitions or spark.sparkContext.defaultParallelism
    spread = indexed.repartition(n)

    def body(batches):
        return compress_partition(batches, preset=preset, budget=budget)

    compressed = spread.mapInPandas(body, schema=OUTPUT_SCHEMA)
    # Cache: the output is written and also summed up, compress once.
    compressed = compressed.cache()
    ordered = compressed.repartitionByRange(parts, "idx").sortWithinPartitions("idx")
    if fmt == "jsonl":
        ordered.select("value").write.mode("overwrite").text(output_dir)
    elif fmt == "parquet":
        ordered.select(
            F.col("idx").alias("position"),
            F.col("value").alias("conversation"),
            "tokens_before",
            "tokens_after",
            "messages_before",
            "messages_after",
            "fits",
        ).write.mode("overwrite").parquet(output_dir)
    else:
        raise ValueError(f"unknown format {fmt!r}: jsonl or parquet")
    totals = compressed.agg(
        F.sum(F.when(F.trim("value") != "", 1).otherwise(0)).alias("conversations"),
        F.sum(F.when(F.col("fits"), 0).otherwise(1)).alias("not_fitting"),
        F.sum("tokens_before").alias("tokens_before"),
        F.sum("tokens_after").alias("tokens_after"),
    ).collect()[0]
    compressed.unpersist()
    figures = {k: int(totals[k] or 0) for k in totals.asDict()}
    figures["seconds"] = time.perf_counter() - started
    return figures


def main(argv=None, spark=None) -> int:
    """The command line. With ``spark`` given, use that session and leave it
    running (for a driver program or a test); otherwise start one and stop it."""
    p = argparse.ArgumentParser(
        description="Compress a JSONL corpus (one conversation a line) with PySpark and ctxpress."
    )
    p.add_argument("input", help="input .jsonl (a path Spark can read: local, hdfs://, s3a://)")
    p.add_argument("output", help="output directory (overwritten)")
    p.add_argument("--preset", default="agent", help="ctxpress preset (default: agent)")
    p.add_argument("--budget", type=int, default=None, help="token budget per conversation")
    p.add_argument("--master", default="local[2]", help="Spark master (default: local[2])")
    p.add_argument("--format", dest="fmt", choices=["jsonl", "parquet"], default="jsonl")
    p.add_argument(
        "--parts", type=int, default=1, help="output part files, in input order (default: 1)"
    )
    p.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="partitions to compress in (default: Spark's default parallelism)",
    )
    a = p.parse_args(argv)
    if "://" not in a.input and not os.path.exists(a.input):
        p.error(f"{a.input}: no such file")

    session = spark if spark is not None else build_session(a.master)
    try:
        f = compress_jsonl(
            session,
            a.input,
            a.output,
            preset=a.preset,
            budget=a.budget,
            fmt=a.fmt,
            parts=a.parts,
            partitions=a.partitions,
        )
    finally:
        if spark is None:
            session.stop()
    rate = f["conversations"] / f["seconds"] if f["seconds"] else 0.0
    print(
        f"{f['conversations']} conversations, {f['tokens_before']} -> {f['tokens_after']} tokens, "
        f"{f['seconds']:.1f} s ({rate:.1f} conversations/s) -> {a.output}"
    )
    if f["not_fitting"]:
        print(
            f"error: {f['not_fitting']} of {f['conversations']} conversations do not fit "
            "the budget (output written; exit 3)",
            file=sys.stderr,
        )
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
