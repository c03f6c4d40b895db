// What the npm package costs over the CLI, and how it scales on libuv's pool.
//
//   node crates/ctxpress-node/bench/overhead.mjs [--cli target/release/ctxpress] [--corpus DIR] [--runs 3]
//
// Run it with a release build of the addon (`npm run build:release` in
// crates/ctxpress-node) and a release CLI. Prints medians of --runs runs as a
// Markdown table (the Node counterpart of crates/ctxpress-py/bench/overhead.py):
//
// - require: `require('ctxpress')` in a fresh node process;
// - per file: the CLI on the whole JSONL (`--jobs 1`, process start included)
//   against the package compressing each line with compressSync (a string in
//   and out; objects in and out: JSON.stringify and JSON.parse included), in
//   MB/s, and the difference per conversation;
// - pool: the same lines through `compress` (async), 1, 2 and 4 in flight.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'

const PKG = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const REPO = resolve(PKG, '../..')
const require = createRequire(import.meta.url)

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith('--') ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
)
const cli = args.cli ?? join(REPO, 'target/release/ctxpress')
const corpus = args.corpus ?? process.env.CTXPRESS_CORPUS ?? join(REPO, '../shared/corpus')
const files = (args.files ?? 'coding_agent_sessions.jsonl,taubench_airline.jsonl,swe_agent_trajs.jsonl').split(',')
const preset = args.preset ?? 'agent'
const runs = Number(args.runs ?? 3)

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
async function medianTime(f) {
  const ts = []
  for (let i = 0; i < runs; i++) {
    const t = performance.now()
    await f()
    ts.push((performance.now() - t) / 1000)
  }
  return median(ts)
}

const loads = []
for (let i = 0; i < Math.max(runs, 5); i++) {
  const r = spawnSync(process.execPath, ['-e', `const t = performance.now(); require(${JSON.stringify(PKG)}); console.log(performance.now() - t)`], { encoding: 'utf8' })
  loads.push(Number(r.stdout))
}
console.log(`require('ctxpress'): ${median(loads).toFixed(1)} ms (median of ${loads.length})\n`)

const { Compressor } = require(PKG)
const c = new Compressor({ preset })
console.log('| file | conversations | MB | CLI MB/s | Node text MB/s | Node objects MB/s | extra per conversation (text / objects) | 1 in flight s | 2 in flight | 4 in flight |')
console.log('|---|---|---|---|---|---|---|---|---|---|')
for (const name of files) {
  const path = join(corpus, name)
  let lines
  try {
    lines = readFileSync(path, 'utf8').split('\n').filter((l) => l !== '')
  } catch {
    console.log(`| ${name} | (missing) |`)
    continue
  }
  const objects = lines.map((l) => JSON.parse(l))
  const mb = statSync(path).size / 1e6
  const dir = mkdtempSync(join(tmpdir(), 'ctxpress-bench-'))
  const out = join(dir, 'out.jsonl')
  const cliTime = await medianTime(() => {
    const r = spawnSync(cli, ['compress', '--preset', preset, '--jobs', '1', path, '-o', out])
    if (r.status !== 0) throw new Error(`${cli} failed: ${r.stderr}`)
  })
  const cliOut = readFileSync(out, 'utf8').split('\n').filter((l) => l !== '')
  rmSync(dir, { recursive: true, force: true })
  const text = await medianTime(() => lines.map((l) => c.compressSync(l)))
  const objs = await medianTime(() => objects.map((o) => c.compressSync(o)))
  const mine = lines.map((l) => c.compressSync(l).messages)
  if (JSON.stringify(mine) !== JSON.stringify(cliOut)) throw new Error(`${name}: Node and CLI outputs differ`)
  const pool = {}
  for (const k of [1, 2, 4]) {
    pool[k] = await medianTime(async () => {
      let next = 0
      const worker = async () => {
        for (let i = next++; i < lines.length; i = next++) await c.compress(lines[i])
      }
      await Promise.all(Array.from({ length: k }, worker))
    })
  }
  const n = lines.length
  const per = (t) => `${((t - cliTime) / n) * 1000 >= 0 ? '+' : '−'}${Math.abs(((t - cliTime) / n) * 1000).toFixed(2)} ms`
  console.log(
    `| ${name} | ${n} | ${mb.toFixed(2)} | ${(mb / cliTime).toFixed(1)} | ${(mb / text).toFixed(1)} | ${(mb / objs).toFixed(1)} | ` +
      `${per(text)} / ${per(objs)} | ${pool[1].toFixed(2)} | ${(pool[1] / pool[2]).toFixed(2)}× | ${(pool[1] / pool[4]).toFixed(2)}× |`,
  )
}
