// The README's Node blocks: every `js` block runs as an ES module inside
// this package (so `import 'ctxpress'` is the package itself), every `ts`
// block is type-checked by tsc against the real `ai` and `@ai-sdk/openai`
// types (running it would call OpenAI), and the `sh` lines of the Node
// section name scripts package.json has. The Rust and Python checkers
// (crates/ctxpress-cli/tests/it/readme.rs, crates/ctxpress-py/pytests/
// test_readme.py) leave these blocks alone.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { PKG, REPO } from './_support.mjs'

function blocks() {
  const out = []
  let open = null
  for (const line of readFileSync(join(REPO, 'README.md'), 'utf8').split('\n')) {
    const fence = line.match(/^```(\S*)\s*$/)
    if (fence && open === null) open = { lang: fence[1], body: '' }
    else if (fence) {
      out.push(open)
      open = null
    } else if (open) open.body += line + '\n'
  }
  return out
}

const scratch = join(PKG, 'test', '.readme')

test('README js blocks run', (t) => {
  const js = blocks().filter((b) => b.lang === 'js' || b.lang === 'javascript' || b.lang === 'mjs')
  assert.ok(js.length >= 1, 'the README has a js block')
  mkdirSync(scratch, { recursive: true })
  try {
    js.forEach((b, i) => {
      const file = join(scratch, `block-${i}.mjs`)
      writeFileSync(file, b.body)
      const r = spawnSync(process.execPath, [file], { cwd: scratch, encoding: 'utf8', timeout: 60000 })
      assert.equal(r.status, 0, `README js block ${i} failed:\n${b.body}\n${r.stdout}${r.stderr}`)
      t.diagnostic(`block ${i}: ${r.stdout.trim()}`)
    })
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
})

test('README ts blocks type-check', () => {
  const ts = blocks().filter((b) => b.lang === 'ts' || b.lang === 'typescript')
  assert.ok(ts.length >= 1, 'the README has a ts block')
  mkdirSync(scratch, { recursive: true })
  try {
    const files = ts.map((b, i) => {
      const file = `block-${i}.mts`
      writeFileSync(join(scratch, file), b.body)
      return file
    })
    writeFileSync(
      join(scratch, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', types: ['node'] },
        files,
      }),
    )
    const tsc = join(PKG, 'node_modules', '.bin', 'tsc')
    const r = spawnSync(tsc, ['--noEmit', '-p', join(scratch, 'tsconfig.json')], { cwd: scratch, encoding: 'utf8', timeout: 120000 })
    assert.equal(r.status, 0, `tsc on the README's ts blocks:\n${r.stdout}${r.stderr}`)
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
})

test('README Node commands name real scripts and files', () => {
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8')
  const section = readme.split('\n## Node / TypeScript')[1].split('\n## ')[0]
  const pkg = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8'))
  const sh = blocks().filter((b) => b.lang === 'sh' && section.includes(b.body))
  assert.ok(sh.length >= 1)
  for (const b of sh) {
    for (const m of b.body.matchAll(/npm run ([\w:-]+)/g)) assert.ok(pkg.scripts[m[1]], `no script ${m[1]}`)
    for (const m of b.body.matchAll(/cd (\S+)/g)) assert.equal(join(REPO, m[1]), PKG)
    for (const m of b.body.matchAll(/ctxpress-(\d+\.\d+\.\d+)\.tgz/g)) assert.equal(m[1], pkg.version, 'the tarball name has the version')
  }
})
