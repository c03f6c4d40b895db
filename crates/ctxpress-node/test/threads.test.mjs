// compress runs on libuv's thread pool: four at once overlap.
//
// Why this is not flaky on two shared cores: the overlap check compares the
// compressions' own wall times (`report.micros`, measured in Rust) with the
// wall time of the batch: run one after another they cannot add up to more
// than the batch, run at once they add up to about four times it, however
// busy the machine is. Whether that makes them faster than four in a row is
// the machine's load to decide, so it is printed, not asserted (as in the
// Python package's test_threads.py).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ctxpress, openaiSession } from './_support.mjs'

const { Compressor } = ctxpress

const conv = JSON.stringify(openaiSession(150, 120))

test('4 compressions at once overlap on the thread pool', async (t) => {
  const c = new Compressor({ preset: 'agent', window: 16000 })
  await c.compress(conv)
  const t0 = performance.now()
  const all = await Promise.all([0, 1, 2, 3].map(() => c.compress(conv)))
  const wall = (performance.now() - t0) * 1000
  const busy = all.reduce((s, r) => s + r.report.micros, 0)
  assert.equal(new Set(all.map((r) => r.messages)).size, 1, 'the same output each time')
  assert.ok(busy > 1.5 * wall, `the compressions took ${busy} µs in all within ${wall.toFixed(0)} µs: they did not overlap`)
  const t1 = performance.now()
  for (let i = 0; i < 4; i++) await c.compress(conv)
  const sequential = performance.now() - t1
  t.diagnostic(`4 at once / 4 in a row: ${(wall / 1000).toFixed(0)} ms / ${sequential.toFixed(0)} ms`)
})

test('the JavaScript thread stays free while compress runs', async () => {
  const c = new Compressor({ preset: 'agent', window: 16000 })
  let ticks = 0
  const timer = setInterval(() => ticks++, 5)
  await c.compress(conv)
  await c.compress(conv)
  clearInterval(timer)
  assert.ok(ticks > 0, 'timers fired during the compressions')
})
