// Type-checked by test/types.test.mjs (`tsc --noEmit -p test/tsconfig.json`):
// the package's d.ts files as a TypeScript user meets them.
import {
  compress, compressSync, Compressor, expand, recall, validate, stats, presets, strategies,
  SqliteArchive, MemoryArchive, CtxpressError, InputError, ConfigError, ArchiveError, version,
  type Result, type Report, type Violation,
} from 'ctxpress'
import { ctxpressMiddleware } from 'ctxpress/ai-sdk'
import { wrapLanguageModel, generateText } from 'ai'
import { MockLanguageModelV3 } from 'ai/test'

type Msg = { role: string; content: string }

export async function usage(): Promise<void> {
  const messages: Msg[] = [{ role: 'user', content: 'hi' }]
  const r: Result<Msg[]> = await compress(messages, { window: 128000 })
  const out: Msg[] = r.messages
  const fits: boolean = r.fits
  const ratio: number = r.ratio
  const report: Report = r.report
  const tokens: number = report.tokens_after
  const text: string = compressSync('[]', { preset: 'identity' }).messages
  const archive = new SqliteArchive('/tmp/ctxpress-types.db')
  const c = new Compressor({ preset: 'agent', budget: 8000, tokenizer: 'o200k_base', archive })
  const again = await c.compress({ messages })
  const restored = expand(again.messages, archive)
  const orig = recall('#h0123456789', new MemoryArchive())
  const v: Violation[] = validate(messages)
  const s = stats(messages, { tokenizer: 'heuristic' })
  const names: string[] = presets().map((p) => p.name)
  const strategyNames: string[] = strategies().map((x) => x.name)
  try {
    compressSync('{', { config: 'version = 1' })
  } catch (e) {
    if (e instanceof InputError) console.log(e.line, e.column)
    else if (e instanceof ConfigError || e instanceof ArchiveError || e instanceof CtxpressError) console.log(e.message)
  }
  const model = wrapLanguageModel({
    model: new MockLanguageModelV3(),
    middleware: ctxpressMiddleware({ window: 128000, dialect: 'anthropic' }),
  })
  const g = await generateText({ model, prompt: 'hello' })
  console.log(out, fits, ratio, tokens, text, restored, orig, v, s.tokens, names, strategyNames, version, g.text, c.needsLlm)
}

// What the types refuse (tsc fails if any of these compiles).
export async function refused(): Promise<void> {
  // @ts-expect-error: window is a number of tokens
  await compress([], { window: 'big' })
  // @ts-expect-error: a string in is a string out
  const n: number = compressSync('[]').messages
  // @ts-expect-error: the archive is an Archive
  new Compressor({ archive: '/tmp/a.db' })
  // @ts-expect-error: two dialects only
  ctxpressMiddleware({ dialect: 'gemini' })
  console.log(n)
}
