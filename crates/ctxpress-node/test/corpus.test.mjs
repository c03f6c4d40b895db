// compress -> expand gives back every conversation of ../shared/corpus,
// through objects (compared JSON-serialized) and through text (compared byte
// for byte), as the Python suite's test_corpus.py does. Lines are compressed
// concurrently (libuv's pool) to use the machine's cores.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { basename } from 'node:path'
import { ctxpress, corpusFiles } from './_support.mjs'

const { Compressor, MemoryArchive, expand } = ctxpress

async function roundTrip(file, budget) {
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l.trim() !== '')
  assert.ok(lines.length, file)
  const arch = new MemoryArchive()
  const c = new Compressor({ preset: 'agent', budget, archive: arch })
  const name = basename(file)
  let next = 0
  const worker = async () => {
    for (let i = next++; i < lines.length; i = next++) {
      const line = lines[i]
      const asObject = JSON.parse(line)
      const r = await c.compress(asObject)
      assert.equal(JSON.stringify(expand(r.messages, arch)), JSON.stringify(asObject), `${name}:${i + 1}`)
      const t = await c.compress(line)
      assert.equal(expand(t.messages, arch), line, `${name}:${i + 1} (text)`)
      assert.deepEqual(JSON.parse(t.messages), r.messages, `${name}:${i + 1}: text and objects agree`)
    }
  }
  await Promise.all([worker(), worker(), worker(), worker()])
  return lines.length
}

test('corpus round trip: compress -> expand', async (t) => {
  const files = corpusFiles(t)
  if (!files) return
  for (const file of files) {
    for (const budget of [undefined, 8000]) {
      await t.test(`${basename(file)} ${budget ? `budget ${budget}` : 'agent'}`, async () => {
        await roundTrip(file, budget)
      })
    }
  }
})
