// `npm pack` gives a tarball that installs offline into a clean project,
// where `require('ctxpress')`, `import 'ctxpress'` and `ctxpress/ai-sdk`
// work (the tarball carries the addon built for this machine).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PKG } from './_support.mjs'

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

function run(cmd, args, cwd) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: 180000, env: { ...process.env, npm_config_update_notifier: 'false' } })
  assert.equal(r.status, 0, `${cmd} ${args.join(' ')} failed:\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

test('npm pack, then npm install --offline into a clean project', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'ctxpress-pack-'))
  try {
    const packed = JSON.parse(run(npm, ['pack', '--json', '--pack-destination', dir], PKG))[0]
    const tgz = join(dir, packed.filename)
    const files = packed.files.map((f) => f.path).sort()
    for (const f of ['index.js', 'index.d.ts', 'ai-sdk.js', 'ai-sdk.d.ts', 'native.js', 'native.d.ts', 'package.json']) {
      assert.ok(files.includes(f), `${f} in the tarball: ${files.join(', ')}`)
    }
    assert.ok(files.some((f) => f.endsWith('.node')), 'the addon is in the tarball')
    assert.ok(!files.some((f) => f.startsWith('test/') || f.startsWith('src/') || f.startsWith('node_modules/')), files.join(', '))
    const app = join(dir, 'app')
    run('mkdir', ['-p', app], dir)
    writeFileSync(join(app, 'package.json'), '{"name": "app", "version": "1.0.0", "private": true}\n')
    run(npm, ['install', '--offline', '--no-audit', '--no-fund', tgz], app)
    const cjs = run(process.execPath, ['-e', `
      const c = require('ctxpress')
      const r = c.compressSync([{role: 'user', content: 'hi'}], {window: 1000})
      if (!r.fits || r.messages[0].content !== 'hi') throw new Error('compress')
      const { ctxpressMiddleware } = require('ctxpress/ai-sdk')
      if (ctxpressMiddleware({window: 1000}).specificationVersion !== 'v3') throw new Error('middleware')
      console.log('ok', c.version)
    `], app)
    assert.match(cjs, /^ok \d/)
    const esm = run(process.execPath, ['--input-type=module', '-e', `
      import { compress } from 'ctxpress'
      const r = await compress('[{"role":"user","content":"hi"}]')
      console.log(typeof r.messages)
    `], app)
    assert.equal(esm.trim(), 'string')
    t.diagnostic(`tarball ${packed.filename}: ${statSync(tgz).size} bytes packed, ${packed.unpackedSize} unpacked, ${packed.entryCount} files`)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
