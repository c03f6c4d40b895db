// ctxpress/ai-sdk with the real `ai` package (devDependency) and its mock
// model: generateText through wrapLanguageModel; what the model receives
// is checked.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { generateText, streamText, wrapLanguageModel, jsonSchema, tool } from 'ai'
import { MockLanguageModelV3, convertArrayToReadableStream } from 'ai/test'
import { ctxpress } from './_support.mjs'
import { ctxpressMiddleware, compressParams, toConversation } from 'ctxpress/ai-sdk'
import { longPrompt } from './_prompt.mjs'

const { stats, validate, Compressor } = ctxpress

// Without the `providerOptions: undefined` the SDK adds to every part.
const plain = (x) => JSON.parse(JSON.stringify(x))

const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: undefined, cacheWrite: undefined },
  outputTokens: { total: 1, text: 1, reasoning: undefined },
}

function mockModel() {
  return new MockLanguageModelV3({
    doGenerate: async () => ({
      content: [{ type: 'text', text: 'done' }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage,
      warnings: [],
    }),
    doStream: async () => ({
      stream: convertArrayToReadableStream([
        { type: 'stream-start', warnings: [] },
        { type: 'text-start', id: 't' },
        { type: 'text-delta', id: 't', delta: 'done' },
        { type: 'text-end', id: 't' },
        { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
      ]),
    }),
  })
}

// The prompt as ModelMessages (what an application passes to generateText).
function modelMessages(prompt) {
  return prompt.map((m) => {
    if (m.role === 'system') return m
    return {
      role: m.role,
      content: m.content.map((p) => (p.type === 'tool-result' ? { ...p, output: p.output } : p)),
    }
  })
}

function tokensOf(prompt, dialect) {
  return stats(toConversation(prompt, dialect).messages).tokens
}

function pairing(prompt) {
  const calls = new Set()
  const results = new Set()
  for (const m of prompt) {
    for (const p of Array.isArray(m.content) ? m.content : []) {
      if (p.type === 'tool-call') calls.add(p.toolCallId)
      if (p.type === 'tool-result') results.add(p.toolCallId)
    }
  }
  return { calls, results }
}

const tools = {
  read_file: tool({
    description: 'Read a file of the repository',
    inputSchema: jsonSchema({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }),
  }),
}

for (const dialect of ['openai', 'anthropic']) {
  test(`${dialect}: a long tool-calling prompt reaches the model within the window`, async () => {
    const model = mockModel()
    const wrapped = wrapLanguageModel({ model, middleware: ctxpressMiddleware({ window: 8000, dialect }) })
    const prompt = longPrompt({ turns: 40, resultLines: 60 })
    const system = prompt[0].content
    const r = await generateText({ model: wrapped, system, messages: modelMessages(prompt.slice(1)), tools })
    assert.equal(r.text, 'done')
    const sent = model.doGenerateCalls[0].prompt
    assert.ok(tokensOf(prompt, dialect) > 8000)
    assert.ok(tokensOf(sent, dialect) <= 3200, `${tokensOf(sent, dialect)} tokens sent`)
    assert.ok(sent.length < prompt.length)
    // The system prompt as given, first.
    assert.deepEqual(sent[0], { role: 'system', content: system })
    // Every tool call has its result and every result its call.
    const { calls, results } = pairing(sent)
    assert.deepEqual([...calls].sort(), [...results].sort())
    assert.deepEqual(validate(toConversation(sent, dialect).messages), [])
    // The last request is there as given.
    assert.deepEqual(plain(sent[sent.length - 1].content), prompt[prompt.length - 1].content)
    // The tools' definitions still reach the model.
    assert.equal(model.doGenerateCalls[0].tools.length, 1)
  })

  test(`${dialect}: a short prompt is passed on unchanged (the same object)`, async () => {
    const prompt = longPrompt({ turns: 2, resultLines: 5 })
    const params = { prompt, maxOutputTokens: 100 }
    const mw = ctxpressMiddleware({ window: 100000, dialect })
    const out = await mw.transformParams({ type: 'generate', params, model: mockModel() })
    assert.equal(out, params)
    // Through generateText too: what the model gets equals what was given.
    const model = mockModel()
    const wrapped = wrapLanguageModel({ model, middleware: mw })
    await generateText({ model: wrapped, system: prompt[0].content, messages: modelMessages(prompt.slice(1)) })
    assert.deepEqual(plain(model.doGenerateCalls[0].prompt), prompt)
  })
}

test('streamText goes through the middleware too', async () => {
  const model = mockModel()
  const wrapped = wrapLanguageModel({ model, middleware: ctxpressMiddleware({ window: 8000 }) })
  const prompt = longPrompt({ turns: 40, resultLines: 60 })
  const r = streamText({ model: wrapped, system: prompt[0].content, messages: modelMessages(prompt.slice(1)) })
  assert.equal(await r.text, 'done')
  assert.ok(tokensOf(model.doStreamCalls[0].prompt, 'openai') <= 3200)
})

test('parts ctxpress does not read come back as the same objects, in place', async () => {
  const image = { type: 'file', mediaType: 'image/png', data: 'iVBORw0KGgo=', providerOptions: { x: { y: 1 } } }
  const custom = { type: 'tool-approval-response', approvalId: 'a1', approved: true }
  const reasoning = { type: 'reasoning', text: 'Let me think.', providerOptions: { anthropic: { signature: 'sig' } } }
  const prompt = longPrompt({ turns: 30, resultLines: 60 })
  const n = prompt.length
  // Recent messages (kept) with parts of other kinds.
  prompt.splice(n - 1, 0,
    { role: 'user', content: [{ type: 'text', text: 'See the screenshot.' }, image] },
    { role: 'assistant', content: [reasoning, { type: 'text', text: 'I see it.' }] },
    { role: 'tool', content: [custom] },
  )
  for (const dialect of ['openai', 'anthropic']) {
    const params = { prompt }
    const out = await compressParams(params, new Compressor({ window: 8000 }), dialect)
    assert.notEqual(out, params)
    const sent = out.prompt
    const userWithImage = sent.find((m) => Array.isArray(m.content) && m.content.includes(image))
    assert.ok(userWithImage, 'the image part is there, the same object')
    assert.equal(userWithImage.content.indexOf(image), 1)
    assert.ok(sent.some((m) => Array.isArray(m.content) && m.content[0] === reasoning), 'the reasoning part, with its signature')
    assert.ok(sent.some((m) => m.role === 'tool' && m.content[0] === custom), 'the approval, in its tool message')
    // Unchanged messages are the very objects given.
    assert.ok(sent.includes(prompt[0]))
    assert.ok(sent.includes(prompt[prompt.length - 1]))
  }
})

test('options are checked', () => {
  assert.throws(() => ctxpressMiddleware({ dialect: 'gemini' }), TypeError)
  assert.throws(() => ctxpressMiddleware({ window: 0 }), ctxpress.ConfigError)
  assert.equal(ctxpressMiddleware({ window: 1000 }).specificationVersion, 'v3')
  assert.equal(ctxpressMiddleware({ window: 1000, specificationVersion: 'v4' }).specificationVersion, 'v4')
  const c = new Compressor({ budget: 1000 })
  assert.equal(typeof ctxpressMiddleware({ compressor: c }).transformParams, 'function')
})
