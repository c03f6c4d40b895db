//! Bytes → parse → a preset → serialize → expand.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ctxpress_fuzz::pipeline(data));
