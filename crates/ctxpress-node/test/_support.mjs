// Shared helpers of the node --test suites.
import { existsSync, readdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createRequire } from 'node:module'

export const PKG = resolve(dirname(fileURLToPath(import.meta.url)), '..')
export const REPO = resolve(PKG, '../..')
export const require = createRequire(import.meta.url)
export const ctxpress = require('../index.js')

/** The shared corpus: $CTXPRESS_CORPUS, else ../shared/corpus beside the repository (as tests/src/corpus.rs). */
export function corpusDir() {
  return process.env.CTXPRESS_CORPUS ? resolve(process.env.CTXPRESS_CORPUS) : resolve(REPO, '../shared/corpus')
}

/** The corpus's .jsonl files, or null after a visible skip; with CI set a missing corpus fails. */
export function corpusFiles(t) {
  const dir = corpusDir()
  if (!existsSync(dir)) {
    const what = `corpus folder ${dir} is missing`
    if (process.env.CI) throw new Error(`${what} (CI is set)`)
    t.skip(`SKIP: ${what} (set CTXPRESS_CORPUS or put shared/ beside the repository)`)
    return null
  }
  const files = readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort()
  if (!files.length) throw new Error(`no .jsonl file in ${dir}`)
  return files.map((f) => join(dir, f))
}

/** A numbered file body, as a tool result. */
export function fileBody(name, lines) {
  const out = []
  for (let i = 1; i <= lines; i++) out.push(`${String(i).padStart(4)} def ${name.replace('.', '_')}_${i}(x):  # line ${i} of ${name}, doing step ${i}`)
  return out.join('\n')
}

/** An OpenAI tool-calling session: read a file a turn. */
export function openaiSession(turns = 12, lines = 60) {
  const msgs = [{ role: 'system', content: 'You are a coding agent.' }]
  for (let t = 0; t < turns; t++) {
    const name = `mod_${t}.py`
    msgs.push({ role: 'user', content: `Please fix the bug in ${name}, test ${t} fails.` })
    msgs.push({
      role: 'assistant',
      content: `Reading ${name}.`,
      tool_calls: [{ id: `call_${t}`, type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path: name }) } }],
    })
    msgs.push({ role: 'tool', tool_call_id: `call_${t}`, content: fileBody(name, lines) })
    msgs.push({ role: 'assistant', content: `Fixed ${name}: the loop now stops at the last line, test ${t} passes.` })
  }
  msgs.push({ role: 'user', content: 'Summarize the fixes.' })
  return msgs
}

/** The same session as an Anthropic request body. */
export function anthropicSession(turns = 12, lines = 60) {
  const msgs = []
  for (let t = 0; t < turns; t++) {
    const name = `mod_${t}.py`
    msgs.push({ role: 'user', content: [{ type: 'text', text: `Please fix the bug in ${name}, test ${t} fails.` }] })
    msgs.push({
      role: 'assistant',
      content: [
        { type: 'text', text: `Reading ${name}.` },
        { type: 'tool_use', id: `toolu_${t}`, name: 'read_file', input: { path: name } },
      ],
    })
    msgs.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: `toolu_${t}`, content: fileBody(name, lines) }] })
    msgs.push({ role: 'assistant', content: [{ type: 'text', text: `Fixed ${name}: the loop now stops at the last line, test ${t} passes.` }] })
  }
  msgs.push({ role: 'user', content: [{ type: 'text', text: 'Summarize the fixes.' }] })
  return { model: 'claude-sonnet-4-5', system: 'You are a coding agent.', max_tokens: 1024, messages: msgs }
}
