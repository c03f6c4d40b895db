// Copy the addon a plain `cargo build -p ctxpress-node` made
// (target/<profile>/libctxpress_node.so) to ctxpress.<platform>.node, where
// native.js loads it. `napi build` does the same and also regenerates
// native.js / native.d.ts, but it always passes `--target`, so it builds the
// whole dependency tree again under target/<triple>/: CI uses this instead,
// after the Python package's build compiled the same dependencies.
//
//   node scripts/copy-addon.mjs [debug|release]
import { copyFileSync, existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execFileSync } from 'node:child_process'

const PKG = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const profile = process.argv[2] ?? 'debug'
const meta = JSON.parse(execFileSync('cargo', ['metadata', '--format-version', '1', '--no-deps'], { cwd: PKG, encoding: 'utf8', maxBuffer: 64 << 20 }))
const lib = { linux: 'libctxpress_node.so', darwin: 'libctxpress_node.dylib', win32: 'ctxpress_node.dll' }[process.platform]
if (!lib) throw new Error(`no addon name for ${process.platform}`)
const from = join(meta.target_directory, profile, lib)
if (!existsSync(from)) throw new Error(`${from} is missing: run cargo build -p ctxpress-node${profile === 'release' ? ' --release' : ''} first`)
const abi = process.platform === 'linux' ? (process.report.getReport().header.glibcVersionRuntime ? '-gnu' : '-musl') : process.platform === 'win32' ? '-msvc' : ''
const to = join(PKG, `ctxpress.${process.platform}-${process.arch}${abi}.node`)
copyFileSync(from, to)
console.log(`${from} -> ${to}`)
