// A long AI SDK tool-calling prompt (LanguageModelV3Prompt) for the tests.
export function longPrompt({ turns = 40, resultLines = 60 } = {}) {
  const prompt = [{ role: 'system', content: 'You are a coding agent. Use the tools to inspect and fix the repository.' }]
  for (let t = 0; t < turns; t++) {
    prompt.push({ role: 'user', content: [{ type: 'text', text: `Step ${t}: look at src/module_${t}.rs and fix the failing test test_${t}.` }] })
    const id = `call_${t}`
    prompt.push({
      role: 'assistant',
      content: [
        { type: 'text', text: `I will read src/module_${t}.rs first.` },
        { type: 'tool-call', toolCallId: id, toolName: 'read_file', input: { path: `src/module_${t}.rs` } },
      ],
    })
    const lines = []
    for (let l = 0; l < resultLines; l++) lines.push(`${l + 1}: fn item_${t}_${l}(x: u32) -> u32 { x.wrapping_mul(${l + 7}) + ${t} } // module ${t} line ${l}`)
    prompt.push({
      role: 'tool',
      content: [{ type: 'tool-result', toolCallId: id, toolName: 'read_file', output: { type: 'text', value: lines.join('\n') } }],
    })
    prompt.push({ role: 'assistant', content: [{ type: 'text', text: `The bug in module ${t} is an overflow in item_${t}_3; I changed it to use wrapping_mul and the test test_${t} passes now.` }] })
  }
  prompt.push({ role: 'user', content: [{ type: 'text', text: 'Now summarize what you changed.' }] })
  return prompt
}
