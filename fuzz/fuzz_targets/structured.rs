//! Random agent sessions (OpenAI or Anthropic, tool calls answered or not)
//! through every preset and back.
#![no_main]
libfuzzer_sys::fuzz_target!(|s: ctxpress_fuzz::session::Session| {
    ctxpress_fuzz::roundtrip(&s.render(), s.pick);
});
