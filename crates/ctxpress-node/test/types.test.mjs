// The hand-written d.ts files (index.d.ts, ai-sdk.d.ts) and the generated
// native.d.ts, checked by the TypeScript compiler (a devDependency) on a
// file that uses the whole API, including what it must refuse.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { join } from 'node:path'
import { PKG } from './_support.mjs'

test('tsc --noEmit on test/types/usage.ts', () => {
  const tsc = join(PKG, 'node_modules', '.bin', 'tsc')
  for (const project of ['test/tsconfig.json']) {
    const r = spawnSync(tsc, ['--noEmit', '-p', project], { cwd: PKG, encoding: 'utf8', timeout: 120000 })
    assert.equal(r.status, 0, `tsc failed:\n${r.stdout}${r.stderr}`)
  }
  const r = spawnSync(tsc, ['--noEmit', '--strict', '--skipLibCheck', 'false', '--module', 'nodenext', 'native.d.ts'], {
    cwd: PKG,
    encoding: 'utf8',
    timeout: 120000,
  })
  assert.equal(r.status, 0, `tsc on native.d.ts failed:\n${r.stdout}${r.stderr}`)
})
