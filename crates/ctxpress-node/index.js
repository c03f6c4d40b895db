'use strict'
// ctxpress: compress LLM conversation and agent histories so the next request
// fits the model's context window, keeping what the model needs.
//
// Messages are OpenAI Chat messages or Anthropic Messages (content blocks),
// given as an array of objects, a `{messages: [...]}` object, or the same as
// JSON text (a string or a Buffer). Results come back in the shape given:
// objects in, objects out; a string in, a string out. The work is done in
// Rust (native.js loads the addon): `compress` on libuv's thread pool,
// `compressSync` on the calling thread.

const fs = require('node:fs')
const native = require('./native.js')

class CtxpressError extends Error {
  constructor(message) {
    super(message)
    this.name = new.target.name
  }
}

class InputError extends CtxpressError {
  constructor(message, line = null, column = null) {
    super(message)
    // 1-based line and column in the JSON text (for text input), else null.
    this.line = line
    this.column = column
  }
}

class ConfigError extends CtxpressError {}
class ArchiveError extends CtxpressError {}

const KINDS = { InputError, ConfigError, ArchiveError, CtxpressError }

// The native module's errors carry `ctxpress:{"kind":...}`; anything else
// (a Node-API type error) passes through.
function rethrow(e) {
  if (e && typeof e.message === 'string' && e.message.startsWith('ctxpress:')) {
    let body
    try {
      body = JSON.parse(e.message.slice('ctxpress:'.length))
    } catch {
      throw e
    }
    const Kind = KINDS[body.kind] || CtxpressError
    if (Kind === InputError) {
      const positioned = body.line > 0
      throw new InputError(body.message, positioned ? body.line : null, positioned ? body.column : null)
    }
    throw new Kind(body.message)
  }
  throw e
}

function call(f) {
  try {
    return f()
  } catch (e) {
    rethrow(e)
  }
}

// Line and column of an input error mean something only for text the caller
// gave, not for text made from its objects.
function forKind(kind, e) {
  if (kind === OBJ && e instanceof InputError) {
    e.line = null
    e.column = null
  }
  return e
}

function callFor(kind, f) {
  try {
    return call(f)
  } catch (e) {
    throw forKind(kind, e)
  }
}

const STR = 'string'
const BUF = 'buffer'
const OBJ = 'object'

// The conversation as JSON text, and the kind to give back.
function encode(messages) {
  if (typeof messages === 'string') return [messages, STR]
  if (Buffer.isBuffer(messages) || messages instanceof Uint8Array) {
    const text = Buffer.from(messages.buffer, messages.byteOffset, messages.byteLength).toString('utf8')
    return [text, BUF]
  }
  if (messages !== null && typeof messages === 'object') {
    let text
    try {
      text = JSON.stringify(messages)
    } catch (e) {
      throw new InputError(`the messages are not JSON: ${e.message}`)
    }
    return [text, OBJ]
  }
  throw new TypeError(
    'messages must be an array of message objects, a {messages: [...]} object, ' +
      `or JSON text (a string or a Buffer), not ${messages === null ? 'null' : typeof messages}`,
  )
}

function decode(text, kind) {
  if (kind === STR) return text
  if (kind === BUF) return Buffer.from(text, 'utf8')
  return JSON.parse(text)
}

const positions = (kind) => kind !== OBJ

// The file a configuration's text was read from, passed by compressorFor.
const CONFIG_NAME = Symbol('ctxpress.configName')

// The configuration's text, and the file it was read from (null for text or
// an object). A one-line string naming an existing file is that file's path.
function configSource(config) {
  if (config === undefined || config === null) return [null, null]
  if (typeof config === 'string') {
    if (!config.includes('\n') && isFile(config)) {
      try {
        return [fs.readFileSync(config, 'utf8'), config]
      } catch (e) {
        throw new ConfigError(`${config}: cannot read: ${e.message}`)
      }
    }
    return [config, null]
  }
  if (typeof config === 'object') return [JSON.stringify(config), null]
  throw new TypeError(`config must be TOML or JSON text, an object, or a file's path, not ${typeof config}`)
}

function isFile(p) {
  try {
    return fs.statSync(p).isFile()
  } catch {
    return false
  }
}

function tokens(name, value) {
  if (value === undefined || value === null) return null
  if (!Number.isInteger(value) || value <= 0 || value > 0xffffffff) {
    throw new ConfigError(`${name} must be a positive number of tokens, not ${JSON.stringify(value)}`)
  }
  return value
}

function nativeArchive(archive) {
  if (archive === undefined || archive === null) return null
  if (!(archive instanceof Archive)) {
    throw new TypeError('archive must be a ctxpress SqliteArchive or MemoryArchive')
  }
  return archive._native
}

/** A store of originals: what `compress` archives and `expand` reads. */
class Archive {
  constructor(made) {
    if (new.target === Archive) throw new TypeError('use new SqliteArchive(path) or new MemoryArchive()')
    Object.defineProperty(this, '_native', { value: made })
  }
  toString() {
    return this._native.describe()
  }
}

/** Originals kept in a SQLite file (created if missing): the CLI's `--archive`. */
class SqliteArchive extends Archive {
  constructor(path) {
    if (typeof path !== 'string' && !(path instanceof URL)) {
      throw new TypeError('SqliteArchive takes the path of its file')
    }
    const p = path instanceof URL ? require('node:url').fileURLToPath(path) : path
    super(call(() => native.NativeArchive.sqlite(p)))
    this.path = p
  }
}

/** Originals kept in memory for the life of this object. */
class MemoryArchive extends Archive {
  constructor() {
    super(native.NativeArchive.memory())
  }
}

function makeResult(out, reportText, kind) {
  const report = JSON.parse(reportText)
  return {
    messages: decode(out, kind),
    report,
    fits: report.fits !== false,
    ratio: report.ratio,
  }
}

/** A configured pipeline, parsed once and reused across calls. */
class Compressor {
  constructor(options = {}) {
    if (typeof options === 'string') options = { preset: options }
    const { preset, config, budget, window, tokenizer, archive, llm } = options
    if (llm !== undefined && llm !== null && typeof llm !== 'object') {
      throw new TypeError('llm must be an object of [llm] settings (base_url, model, ...)')
    }
    const [configText, configName] = CONFIG_NAME in options ? [config, options[CONFIG_NAME]] : configSource(config)
    const chosen = configText !== null ? null : (preset ?? null)
    const a = nativeArchive(archive)
    try {
      this._native = new native.NativeCompressor(
        chosen,
        configText,
        configName,
        tokens('budget', budget),
        tokens('window', window),
        tokenizer ?? null,
        a,
        llm ? JSON.stringify(llm) : null,
      )
    } catch (e) {
      rethrow(e)
    }
    this.archive = archive ?? null
  }

  /** True when the pipeline calls an LLM endpoint. */
  get needsLlm() {
    return this._native.needsLlm
  }

  /** The configuration in force, as TOML or JSON text. */
  get config() {
    return this._native.config
  }

  /** Compress one conversation on libuv's thread pool. */
  async compress(messages) {
    const [text, kind] = encode(messages)
    let pair
    try {
      pair = await this._native.compress(text, positions(kind))
    } catch (e) {
      try {
        rethrow(e)
      } catch (e2) {
        throw forKind(kind, e2)
      }
    }
    return makeResult(pair[0], pair[1], kind)
  }

  /** Compress one conversation on this thread (for small inputs). */
  compressSync(messages) {
    const [text, kind] = encode(messages)
    const pair = callFor(kind, () => this._native.compressSync(text, positions(kind)))
    return makeResult(pair[0], pair[1], kind)
  }

  toString() {
    return `Compressor(${this._native.describe()})`
  }
}

// Compressors for distinct option sets without an archive or LLM (keyed by
// the configuration's text, a file's as read now), most recently used last.
const cache = new Map()
const CACHE_SIZE = 16

function compressorFor(options = {}) {
  const { archive, llm } = options
  if (archive || llm) return new Compressor(options)
  const [text, name] = configSource(options.config)
  const key = JSON.stringify([
    text === null ? (options.preset ?? null) : null,
    text,
    name,
    options.budget ?? null,
    options.window ?? null,
    options.tokenizer ?? null,
  ])
  let c = cache.get(key)
  if (c) {
    cache.delete(key)
  } else {
    c = new Compressor({ ...options, config: text, [CONFIG_NAME]: name })
    if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value)
  }
  cache.set(key, c)
  return c
}

/**
 * Compress one conversation off the JavaScript thread. Resolves to
 * `{messages, report, fits, ratio}`, `messages` in the shape given.
 */
async function compress(messages, options = {}) {
  return compressorFor(options).compress(messages)
}

/** `compress` on the calling thread. */
function compressSync(messages, options = {}) {
  return compressorFor(options).compressSync(messages)
}

/**
 * Restore the originals of a compressed conversation from `archive`. With
 * `partial: true` what could be restored is returned; otherwise messages
 * the archive cannot restore are an ArchiveError.
 */
function expand(messages, archive, options = {}) {
  const a = nativeArchive(archive)
  if (!a) throw new TypeError('expand needs the archive the conversation was compressed with')
  const [text, kind] = encode(messages)
  const [out, leftText] = callFor(kind, () => native.expand(text, a, positions(kind)))
  const left = JSON.parse(leftText)
  if (left.length && !options.partial) {
    const shown = left.slice(0, 8).map((i) => `messages[${i}]`).join(', ')
    const more = left.length > 8 ? ', ...' : ''
    throw new ArchiveError(
      `${left.length} compressed messages could not be restored from ${archive} ` +
        `(${shown}${more}; not the archive they were compressed with?); ` +
        '{partial: true} returns what could be restored',
    )
  }
  return decode(out, kind)
}

/**
 * The original messages a recall handle (`#h` and ten hex digits, in the
 * markers ctxpress writes with an archive) stands for, or null.
 */
function recall(handle, archive) {
  const a = nativeArchive(archive)
  if (!a) throw new TypeError('recall needs an archive')
  if (typeof handle !== 'string') throw new InputError(`${JSON.stringify(handle)} is not a handle`)
  const out = call(() => native.recall(handle, a))
  return out === null ? null : JSON.parse(out)
}

/** Tool-call pairing and role violations: `[{index, kind, detail, message}]`. */
function validate(messages) {
  const [text, kind] = encode(messages)
  return JSON.parse(callFor(kind, () => native.validate(text, positions(kind))))
}

/** Messages and tokens by role, characters and the tool-output share. */
function stats(messages, options = {}) {
  const [text, kind] = encode(messages)
  return JSON.parse(callFor(kind, () => native.stats(text, options.tokenizer ?? null, positions(kind))))
}

/** The presets: `[{name, summary, config}]` (config as TOML). */
function presets() {
  return JSON.parse(native.presets())
}

/** The registered strategies: `[{name, summary, defaults, params, takes_llm}]`. */
function strategies() {
  return JSON.parse(call(() => native.strategies()))
}

const version = native.version()

module.exports = {
  compress,
  compressSync,
  Compressor,
  expand,
  recall,
  validate,
  stats,
  presets,
  strategies,
  Archive,
  SqliteArchive,
  MemoryArchive,
  CtxpressError,
  InputError,
  ConfigError,
  ArchiveError,
  version,
}
