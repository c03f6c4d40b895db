// Every function of the package, both dialects, the shapes in and out, errors.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ctxpress, openaiSession, anthropicSession } from './_support.mjs'

const {
  compress, compressSync, Compressor, expand, recall, validate, stats, presets, strategies,
  SqliteArchive, MemoryArchive, Archive, CtxpressError, InputError, ConfigError, ArchiveError, version,
} = ctxpress

const tmp = () => mkdtempSync(join(tmpdir(), 'ctxpress-node-'))

test('identity gives the messages back in the shape given', async () => {
  const msgs = [{ role: 'user', content: 'hi' }]
  const r = await compress(msgs, { preset: 'identity' })
  assert.deepEqual(r.messages, msgs)
  assert.equal(r.fits, true)
  assert.equal(r.ratio, 1)
  assert.equal(r.report.messages_before, 1)
  const text = JSON.stringify(msgs)
  const s = compressSync(text, { preset: 'identity' })
  assert.equal(typeof s.messages, 'string')
  assert.equal(s.messages, text)
  const b = compressSync(Buffer.from(text), { preset: 'identity' })
  assert.ok(Buffer.isBuffer(b.messages))
  assert.equal(b.messages.toString(), text)
  const body = { model: 'm', messages: msgs }
  assert.deepEqual(compressSync(body, { preset: 'identity' }).messages, body)
})

for (const [name, make] of [['openai', openaiSession], ['anthropic', anthropicSession]]) {
  test(`${name}: a window brings a long session under its target, pairs kept`, async () => {
    const conv = make(30, 80)
    const before = stats(conv)
    const r = await compress(conv, { window: 8000 })
    assert.equal(r.fits, true)
    assert.ok(before.tokens > 8000, `${before.tokens} tokens in`)
    assert.ok(r.report.tokens_after <= 3200, `${r.report.tokens_after} tokens out`)
    assert.deepEqual(validate(r.messages), [])
    assert.ok(r.ratio > 2)
    // Sync and async agree.
    assert.deepEqual(compressSync(conv, { window: 8000 }).messages, r.messages)
    // A budget too.
    const b = await compress(conv, { budget: 4000 })
    assert.ok(b.report.tokens_after <= 4000)
  })

  test(`${name}: under the trigger nothing changes`, async () => {
    const conv = make(2, 5)
    const text = JSON.stringify(conv)
    const r = await compress(text, { window: 100000 })
    assert.equal(r.messages, text)
  })

  test(`${name}: compress with an archive, then expand and recall`, async () => {
    const dir = tmp()
    try {
      const conv = make(30, 80)
      for (const arch of [new MemoryArchive(), new SqliteArchive(join(dir, 'a.db'))]) {
        assert.ok(arch instanceof Archive)
        const c = new Compressor({ preset: 'agent', window: 8000, archive: arch })
        assert.equal(c.archive, arch)
        const r = await c.compress(conv)
        assert.notDeepEqual(r.messages, conv)
        assert.deepEqual(expand(r.messages, arch), conv)
        const text = JSON.stringify(conv)
        const t = c.compressSync(text)
        assert.equal(expand(t.messages, arch), text)
        const handles = t.messages.match(/#h[0-9a-f]{10}/g) || []
        assert.ok(handles.length > 0, 'markers carry handles')
        const got = recall(handles[0], arch)
        assert.ok(Array.isArray(got) && got.length > 0)
        assert.equal(recall('#h0000000000', arch), null)
        assert.throws(() => recall('nope', arch), InputError)
        // Another archive cannot restore it.
        assert.throws(() => expand(t.messages, new MemoryArchive()), ArchiveError)
        assert.equal(typeof expand(t.messages, new MemoryArchive(), { partial: true }), 'string')
      }
      assert.match(String(new SqliteArchive(join(dir, 'a.db'))), /SqliteArchive/)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
}

test('bad JSON is an InputError with line and column', async () => {
  const bad = '[{"role": "user",\n  "content": }]'
  for (const run of [() => compressSync(bad), () => validate(bad), () => stats(bad)]) {
    assert.throws(run, (e) => {
      assert.ok(e instanceof InputError && e instanceof CtxpressError && e instanceof Error)
      assert.equal(e.name, 'InputError')
      assert.equal(e.line, 2)
      assert.equal(e.column, 14)
      assert.match(e.message, /line 2, column 14/)
      return true
    })
  }
  await assert.rejects(compress(bad), (e) => e instanceof InputError && e.line === 2)
  // Not a conversation, given as objects: no position.
  assert.throws(() => compressSync({ nope: 1 }), (e) => e instanceof InputError && e.line === null)
  assert.throws(() => compressSync(42), TypeError)
})

test('bad configuration is a ConfigError', async () => {
  const msgs = [{ role: 'user', content: 'hi' }]
  assert.throws(() => compressSync(msgs, { preset: 'agnet' }), (e) => e instanceof ConfigError && /agnet/.test(e.message))
  assert.throws(() => new Compressor({ config: 'version = 1\n[[stages]]\ntype = "dedupp"\n' }), (e) => e instanceof ConfigError && /dedup/.test(e.message))
  assert.throws(() => new Compressor({ config: { version: 1, stages: [{ type: 'dedup', nope: 1 }] } }), ConfigError)
  assert.throws(() => new Compressor({ window: -5 }), ConfigError)
  assert.throws(() => new Compressor({ budget: 1.5 }), ConfigError)
  assert.throws(() => new Compressor({ tokenizer: 'gpt2' }), ConfigError)
  await assert.rejects(compress(msgs, { preset: 'nope' }), ConfigError)
  assert.throws(() => new SqliteArchive('/proc/nope/a.db'), ArchiveError)
})

test('a config file, text, or object', () => {
  const dir = tmp()
  try {
    const path = join(dir, 'p.toml')
    writeFileSync(path, 'version = 1\n[[stages]]\ntype = "dedup"\n')
    const c = new Compressor({ config: path })
    assert.match(c.config, /dedup/)
    assert.equal(c.needsLlm, false)
    assert.match(new Compressor({ config: 'version = 1\n[[stages]]\ntype = "dedup"\n' }).config, /dedup/)
    const conv = openaiSession(4, 10)
    assert.deepEqual(compressSync(conv, { config: { version: 1, stages: [{ type: 'dedup' }] } }).messages.length, conv.length)
    // compress() keys its cached compressors by the file's text, read each call.
    assert.equal(compressSync(conv, { config: path }).report.stages[0].name, 'dedup')
    writeFileSync(path, 'version = 1\n[[stages]]\ntype = "classifier"\n')
    assert.equal(compressSync(conv, { config: path }).report.stages[0].name, 'classifier')
    // A file's errors name it, with the line.
    writeFileSync(path, 'version = 1\n[[stages]\ntype = "dedup"\n')
    assert.throws(() => new Compressor({ config: path }), (e) => e instanceof ConfigError && e.message.includes('p.toml:2'))
    const agent = presets().find((p) => p.name === 'agent')
    assert.equal(new Compressor('agent').config, agent.config)
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('validate finds an unpaired tool call', () => {
  const conv = openaiSession(2, 3)
  assert.deepEqual(validate(conv), [])
  const broken = conv.filter((m) => m.role !== 'tool')
  const v = validate(broken)
  assert.ok(v.length > 0)
  assert.deepEqual(Object.keys(v[0]).sort(), ['detail', 'index', 'kind', 'message'])
})

test('stats, presets, strategies, version', () => {
  const s = stats(openaiSession(3, 20), { tokenizer: 'o200k_base' })
  assert.equal(s.tokenizer, 'o200k_base')
  assert.equal(s.messages, 14)
  assert.ok(s.tool_output_share > 0.5)
  assert.ok(s.roles.tool.tokens > 0)
  const a = stats(anthropicSession(3, 20))
  assert.ok(a.system_tokens > 0)
  const names = presets().map((p) => p.name)
  for (const n of ['identity', 'chat', 'cce', 'agent', 'hybrid', 'compact']) assert.ok(names.includes(n), n)
  const st = strategies()
  assert.ok(st.length >= 6)
  for (const x of st) {
    assert.equal(typeof x.name, 'string')
    assert.deepEqual(Object.keys(x.params).sort(), Object.keys(x.defaults).sort(), x.name)
  }
  assert.match(version, /^\d+\.\d+\.\d+/)
})

test('compress reuses a compressor per option set', async () => {
  const conv = openaiSession(20, 40)
  const a = await compress(conv, { window: 6000, tokenizer: 'cl100k_base' })
  const b = await compress(conv, { window: 6000, tokenizer: 'cl100k_base' })
  assert.deepEqual(a.messages, b.messages)
  assert.equal(a.report.budget.counter, 'cl100k_base')
})

test('the package loads as ESM with named exports', async () => {
  const m = await import('../index.js')
  assert.equal(typeof m.compress, 'function')
  assert.equal(typeof m.InputError, 'function')
  const ai = await import('ctxpress/ai-sdk')
  assert.equal(typeof ai.ctxpressMiddleware, 'function')
})

test('native.d.ts (generated by napi build, committed) declares what the addon exports', async () => {
  // CI builds the addon with cargo, not napi build (which would regenerate
  // native.d.ts): this catches a Rust export added or removed without it.
  const { readFileSync } = await import('node:fs')
  const dts = readFileSync(new URL('../native.d.ts', import.meta.url), 'utf8')
  const declared = [...dts.matchAll(/^export declare (?:function|class|const) (\w+)/gm)].map((m) => m[1]).sort()
  const native = ctxpress.__native ?? (await import('../native.js')).default
  assert.deepEqual(Object.keys(native).sort(), declared)
  for (const cls of ['NativeCompressor', 'NativeArchive']) {
    const body = dts.split(`export declare class ${cls} {`)[1].split('\n}')[0]
    const methods = [...body.matchAll(/^  (?:static |get )?(\w+)\(/gm)].map((m) => m[1]).filter((m) => m !== 'constructor').sort()
    const proto = Object.getOwnPropertyNames(native[cls].prototype).filter((m) => m !== 'constructor')
    const statics = Object.getOwnPropertyNames(native[cls]).filter((m) => !['length', 'name', 'prototype', 'arguments', 'caller'].includes(m))
    assert.deepEqual([...proto, ...statics].sort(), methods, cls)
  }
})
