'use strict'
// ctxpress/ai-sdk: a Vercel AI SDK language-model middleware
// (`wrapLanguageModel({model, middleware: ctxpressMiddleware({window})})`).
//
// `transformParams` turns the call's prompt (system, user, assistant and tool
// messages made of parts) into an OpenAI- or Anthropic-shaped conversation,
// compresses it to the window or budget, and turns the result back into
// prompt messages. Each message ctxpress is given carries the index of the
// prompt message it came from (`ctxpress_ref`, a field ctxpress keeps), so
// the way back rebuilds every surviving prompt message from its original:
// a message ctxpress left alone comes back as the very same object; parts
// ctxpress does not read (files, tool approvals, provider-executed results,
// anything newer) keep their position and object; tool calls and results are
// found by their id. A prompt at or under the trigger comes back unchanged:
// the same params object.

const { Compressor } = require('./index.js')

const REF = 'ctxpress_ref'
const STANDIN = 'ctxpress-part:'

function middlewareVersion(v) {
  return v === 'v4' ? 'v4' : 'v3'
}

/**
 * @param {object} options preset, config, budget, window, tokenizer, archive,
 *   llm (as for `Compressor`), or compressor (a `Compressor` made already); dialect: 'openai' (default) or 'anthropic';
 *   specificationVersion: 'v3' (ai@6, default) or 'v4' (ai@7).
 */
function ctxpressMiddleware(options = {}) {
  const { dialect = 'openai', specificationVersion, compressor: given, ...rest } = options
  if (dialect !== 'openai' && dialect !== 'anthropic') {
    throw new TypeError(`dialect must be 'openai' or 'anthropic', not ${JSON.stringify(dialect)}`)
  }
  if (given !== undefined && !(given instanceof Compressor)) {
    throw new TypeError('compressor must be a ctxpress Compressor')
  }
  const compressor = given ?? new Compressor(rest)
  return {
    specificationVersion: middlewareVersion(specificationVersion),
    async transformParams({ params }) {
      return compressParams(params, compressor, dialect)
    },
  }
}

/** Compress a call's params; the same object when nothing changed. */
async function compressParams(params, compressor, dialect = 'openai') {
  const prompt = params.prompt
  if (!Array.isArray(prompt) || prompt.length === 0) return params
  const { messages, pinned } = toConversation(prompt, dialect)
  const body = { messages }
  const tools = toolDefinitions(params.tools, dialect)
  if (tools.length) body.tools = tools
  const text = JSON.stringify(body)
  const r = await compressor.compress(text)
  if (r.messages === text) return params
  const out = JSON.parse(r.messages).messages
  const back = fromConversation(out, prompt, pinned, dialect)
  if (back.length === prompt.length && back.every((m, i) => m === prompt[i])) return params
  return { ...params, prompt: back }
}

function toolDefinitions(tools, dialect) {
  if (!Array.isArray(tools)) return []
  return tools
    .filter((t) => t && t.type === 'function')
    .map((t) =>
      dialect === 'anthropic'
        ? { name: t.name, description: t.description, input_schema: t.inputSchema }
        : { type: 'function', function: { name: t.name, description: t.description, parameters: t.inputSchema } },
    )
}

// ---- prompt → conversation

function textOf(output) {
  if (!output || typeof output !== 'object') return String(output ?? '')
  switch (output.type) {
    case 'text':
    case 'error-text':
      return String(output.value ?? '')
    case 'json':
    case 'error-json':
      return JSON.stringify(output.value ?? null)
    case 'execution-denied':
      return output.reason ? `execution denied: ${output.reason}` : 'execution denied'
    case 'content':
      return (output.value || [])
        .map((p) => (p && p.type === 'text' ? p.text : `[${(p && p.type) || 'part'}]`))
        .join('\n')
    default:
      return JSON.stringify(output)
  }
}

function inputText(input) {
  if (typeof input === 'string') return input
  return JSON.stringify(input ?? {})
}

const isImage = (p) => typeof p.mediaType === 'string' && p.mediaType.startsWith('image/')

/**
 * The conversation ctxpress reads, and the prompt messages it is not given
 * (nothing in them it can read), which come back after the message before
 * them.
 */
function toConversation(prompt, dialect) {
  const messages = []
  const pinned = []
  prompt.forEach((m, i) => {
    const made = dialect === 'anthropic' ? anthropicOf(m, i) : openaiOf(m, i)
    if (made.length === 0) pinned.push(i)
    for (const x of made) {
      x[REF] = i
      messages.push(x)
    }
  })
  return { messages, pinned }
}

function openaiOf(m, i) {
  const parts = Array.isArray(m.content) ? m.content : null
  switch (m.role) {
    case 'system':
      return [{ role: 'system', content: typeof m.content === 'string' ? m.content : textsOf(parts).join('\n') }]
    case 'user': {
      if (!parts) return [{ role: 'user', content: String(m.content ?? '') }]
      const content = []
      parts.forEach((p, j) => {
        if (p.type === 'text') content.push({ type: 'text', text: p.text })
        else if (p.type === 'file' && isImage(p)) content.push({ type: 'image_url', image_url: { url: `${STANDIN}${i}.${j}` } })
        else if (p.type === 'file') content.push({ type: 'file', file: { file_id: `${STANDIN}${i}.${j}` } })
      })
      if (content.length === 0) return []
      const only = content.length === 1 && content[0].type === 'text'
      return [{ role: 'user', content: only ? content[0].text : content }]
    }
    case 'assistant': {
      if (!parts) return [{ role: 'assistant', content: String(m.content ?? '') }]
      const texts = textsOf(parts)
      const reasoning = parts.filter((p) => p.type === 'reasoning').map((p) => p.text)
      const calls = parts
        .filter((p) => p.type === 'tool-call' && !p.providerExecuted)
        .map((p) => ({ id: p.toolCallId, type: 'function', function: { name: p.toolName, arguments: inputText(p.input) } }))
      if (!texts.length && !reasoning.length && !calls.length) return []
      const out = { role: 'assistant', content: texts.length === 1 ? texts[0] : texts.length ? texts.map((t) => ({ type: 'text', text: t })) : null }
      if (reasoning.length) out.reasoning_content = reasoning.join('\n\n')
      if (calls.length) out.tool_calls = calls
      return [out]
    }
    case 'tool': {
      if (!parts) return []
      return parts
        .filter((p) => p.type === 'tool-result')
        .map((p) => ({ role: 'tool', tool_call_id: p.toolCallId, content: textOf(p.output) }))
    }
    default:
      return []
  }
}

function anthropicOf(m, i) {
  const parts = Array.isArray(m.content) ? m.content : null
  switch (m.role) {
    case 'system':
      return [{ role: 'system', content: typeof m.content === 'string' ? m.content : textsOf(parts).join('\n') }]
    case 'user':
    case 'assistant': {
      if (!parts) return [{ role: m.role, content: String(m.content ?? '') }]
      const blocks = []
      parts.forEach((p, j) => {
        if (p.type === 'text') blocks.push({ type: 'text', text: p.text })
        else if (p.type === 'reasoning' && m.role === 'assistant') blocks.push({ type: 'thinking', thinking: p.text })
        else if (p.type === 'tool-call' && !p.providerExecuted)
          blocks.push({ type: 'tool_use', id: p.toolCallId, name: p.toolName, input: objectInput(p.input) })
        else if (p.type === 'file' && m.role === 'user')
          blocks.push({ type: isImage(p) ? 'image' : 'document', source: { type: 'url', url: `${STANDIN}${i}.${j}` } })
      })
      return blocks.length ? [{ role: m.role, content: blocks }] : []
    }
    case 'tool': {
      if (!parts) return []
      const blocks = parts
        .filter((p) => p.type === 'tool-result')
        .map((p) => {
          const b = { type: 'tool_result', tool_use_id: p.toolCallId, content: textOf(p.output) }
          if (p.output && (p.output.type === 'error-text' || p.output.type === 'error-json')) b.is_error = true
          return b
        })
      return blocks.length ? [{ role: 'user', content: blocks }] : []
    }
    default:
      return []
  }
}

function objectInput(input) {
  if (input && typeof input === 'object' && !Array.isArray(input)) return input
  return { input: input ?? null }
}

function textsOf(parts) {
  return (parts || []).filter((p) => p.type === 'text').map((p) => p.text)
}

// ---- conversation → prompt

/** What an output message says, whatever its dialect. */
function viewOf(msg) {
  const v = { role: msg.role, texts: [], reasoning: null, calls: new Map(), results: new Map(), standins: new Set() }
  const c = msg.content
  if (typeof c === 'string') {
    if (msg.role === 'tool') v.results.set(msg.tool_call_id, c)
    else if (c !== '') v.texts.push(c)
  } else if (Array.isArray(c)) {
    for (const b of c) {
      if (!b || typeof b !== 'object') continue
      switch (b.type) {
        case 'text':
          if (msg.role === 'tool') v.results.set(msg.tool_call_id, (v.results.get(msg.tool_call_id) ?? '') + b.text)
          else v.texts.push(b.text)
          break
        case 'thinking':
          v.reasoning = (v.reasoning === null ? '' : v.reasoning + '\n\n') + (b.thinking ?? '')
          break
        case 'tool_use':
          v.calls.set(b.id, { name: b.name, input: b.input })
          break
        case 'tool_result':
          v.results.set(b.tool_use_id, resultText(b.content))
          break
        case 'image_url':
          v.standins.add(b.image_url && b.image_url.url)
          break
        case 'file':
          v.standins.add(b.file && b.file.file_id)
          break
        case 'image':
        case 'document':
          v.standins.add(b.source && b.source.url)
          break
      }
    }
  }
  if (typeof msg.reasoning_content === 'string') v.reasoning = msg.reasoning_content
  for (const tc of msg.tool_calls || []) {
    if (tc && tc.function) v.calls.set(tc.id, { name: tc.function.name, arguments: tc.function.arguments })
  }
  return v
}

function resultText(content) {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) return content.map((b) => (b && b.type === 'text' ? b.text : '')).join('')
  return ''
}

function merge(a, b) {
  for (const t of b.texts) a.texts.push(t)
  if (b.reasoning !== null) a.reasoning = a.reasoning === null ? b.reasoning : `${a.reasoning}\n\n${b.reasoning}`
  for (const [k, x] of b.calls) a.calls.set(k, x)
  for (const [k, x] of b.results) a.results.set(k, x)
  for (const s of b.standins) a.standins.add(s)
  return a
}

function fromConversation(out, prompt, pinned, dialect) {
  // The encoded form of each prompt message, to tell what ctxpress changed.
  const before = new Map()
  toConversation(prompt, dialect).messages.forEach((m) => {
    const i = m[REF]
    before.set(i, before.has(i) ? merge(before.get(i), viewOf(m)) : viewOf(m))
  })
  const names = new Map()
  for (const m of prompt) {
    if (Array.isArray(m.content)) for (const p of m.content) if (p.type === 'tool-call') names.set(p.toolCallId, p.toolName)
  }
  // Consecutive output messages from one prompt message are one group.
  const groups = []
  for (const m of out) {
    const ref = Number.isInteger(m[REF]) && m[REF] >= 0 && m[REF] < prompt.length ? m[REF] : null
    const last = groups[groups.length - 1]
    if (ref !== null && last && last.ref === ref) merge(last.view, viewOf(m))
    else groups.push({ ref, view: viewOf(m) })
  }
  const result = []
  let pin = 0
  const flushPinned = (upTo) => {
    while (pin < pinned.length && pinned[pin] < upTo) result.push(prompt[pinned[pin++]])
  }
  for (const g of groups) {
    if (g.ref !== null) {
      flushPinned(g.ref)
      const m = rebuild(prompt[g.ref], g.ref, before.get(g.ref), g.view)
      if (m) result.push(m)
    } else {
      const m = fresh(g.view, names)
      if (m) result.push(m)
    }
  }
  flushPinned(Infinity)
  return result
}

const same = (a, b) => a === b || JSON.stringify(a) === JSON.stringify(b)

function sameView(a, b) {
  return (
    same(a.texts, b.texts) &&
    a.reasoning === b.reasoning &&
    same([...a.calls], [...b.calls]) &&
    same([...a.results], [...b.results]) &&
    same([...a.standins], [...b.standins])
  )
}

/** Prompt message `i` as ctxpress left it: the original when unchanged. */
function rebuild(orig, i, was, now) {
  if (was && sameView(was, now)) return orig
  if (orig.role === 'system' || !Array.isArray(orig.content)) {
    const text = now.texts.join('\n')
    if (orig.role === 'tool') return orig
    return { ...orig, content: text }
  }
  const parts = []
  const texts = orig.content.filter((p) => p.type === 'text')
  let textAt = 0
  let reasoningDone = false
  orig.content.forEach((p, j) => {
    switch (p.type) {
      case 'text': {
        // Texts by position; when ctxpress joined them, the first takes all.
        const k = textAt++
        let t
        if (now.texts.length === texts.length) t = now.texts[k]
        else if (k === 0) t = now.texts.join('\n')
        if (t === undefined || (t === '' && k > 0)) break
        parts.push(t === p.text ? p : { ...p, text: t })
        break
      }
      case 'reasoning': {
        if (orig.role !== 'assistant') {
          parts.push(p)
          break
        }
        if (was && now.reasoning === was.reasoning) {
          parts.push(p)
          break
        }
        // Changed: one reasoning part with the new text, without the
        // original's provider options (a signature would no longer match).
        if (!reasoningDone && now.reasoning) parts.push({ type: 'reasoning', text: now.reasoning })
        reasoningDone = true
        break
      }
      case 'tool-call': {
        if (p.providerExecuted) {
          parts.push(p)
          break
        }
        const c = now.calls.get(p.toolCallId)
        if (!c) break
        const w = was && was.calls.get(p.toolCallId)
        if (w && same(w, c)) parts.push(p)
        else parts.push({ ...p, input: 'arguments' in c ? parseArguments(c.arguments) : c.input })
        break
      }
      case 'tool-result': {
        if (orig.role !== 'tool') {
          parts.push(p)
          break
        }
        const r = now.results.get(p.toolCallId)
        if (r === undefined) break
        const w = was && was.results.get(p.toolCallId)
        parts.push(w === r ? p : { ...p, output: { type: 'text', value: r } })
        break
      }
      case 'file': {
        if (orig.role !== 'user') {
          parts.push(p)
          break
        }
        if (now.standins.has(`${STANDIN}${i}.${j}`)) parts.push(p)
        break
      }
      default:
        parts.push(p)
    }
  })
  if (parts.length === 0) return null
  return { ...orig, content: parts }
}

function parseArguments(a) {
  if (typeof a !== 'string') return a
  try {
    return JSON.parse(a)
  } catch {
    return a
  }
}

/** A message ctxpress wrote (a summary, a ledger note). */
function fresh(v, names) {
  switch (v.role) {
    case 'system':
      return { role: 'system', content: v.texts.join('\n') }
    case 'tool':
    case 'user': {
      const results = [...v.results].map(([id, value]) => ({
        type: 'tool-result',
        toolCallId: id,
        toolName: names.get(id) ?? 'tool',
        output: { type: 'text', value },
      }))
      if (results.length) return { role: 'tool', content: results }
      if (!v.texts.length) return null
      return { role: 'user', content: v.texts.map((text) => ({ type: 'text', text })) }
    }
    case 'assistant': {
      const content = v.texts.map((text) => ({ type: 'text', text }))
      for (const [id, c] of v.calls) {
        content.push({
          type: 'tool-call',
          toolCallId: id,
          toolName: c.name,
          input: 'arguments' in c ? parseArguments(c.arguments) : c.input,
        })
      }
      return content.length ? { role: 'assistant', content } : null
    }
    default:
      return null
  }
}

module.exports = { ctxpressMiddleware, compressParams, toConversation, fromConversation }
