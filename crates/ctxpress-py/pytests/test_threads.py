"""The interpreter lock is released while Rust works: threads compress in
parallel, and a Compressor is shared by them safely."""

from __future__ import annotations

import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import ctxpress
from _support import openai_session


def _work():
    # Text in, text out: the Python side of each call is negligible.
    return [json.dumps(openai_session(30 + i, 150)) for i in range(8)]


def _best(f, runs=3):
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


def test_four_threads_beat_one_thread_on_the_same_work():
    c = ctxpress.Compressor("agent")
    convs = _work()
    expected = [c.compress(x).messages for x in convs]

    def sequential():
        for x in convs:
            c.compress(x)

    results = {}

    def threaded():
        with ThreadPoolExecutor(4) as ex:
            results["out"] = [r.messages for r in ex.map(c.compress, convs)]

    t1 = _best(sequential)
    t4 = _best(threaded)
    assert results["out"] == expected, "the same output on 4 threads"
    cores = os.cpu_count() or 1
    print(f"\n1 thread {t1:.3f}s, 4 threads {t4:.3f}s: {t1 / t4:.2f}x on {cores} cores")
    if cores >= 2:
        assert t4 < t1, f"4 threads {t4:.3f}s, 1 thread {t1:.3f}s"


def test_other_python_threads_run_while_one_compresses():
    c = ctxpress.Compressor("agent")
    big = json.dumps(openai_session(200, 200))
    done = threading.Event()
    ticks = 0

    def run():
        c.compress(big)
        done.set()

    t = threading.Thread(target=run)
    t.start()
    while not done.is_set():
        ticks += 1
        time.sleep(0.001)
    t.join()
    assert ticks > 5, "the main thread was blocked while Rust worked"


def test_compress_many_on_threads_equals_one_by_one():
    c = ctxpress.Compressor("hybrid")
    convs = _work()
    assert [r.messages for r in c.compress_many(convs, jobs=4)] == [c.compress(x).messages for x in convs]
