//! Pipeline config parsing (TOML or JSON) and building.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ctxpress_fuzz::config(data));
