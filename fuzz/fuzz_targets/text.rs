//! Classifier, summarizer and secret detector on arbitrary UTF-8.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| ctxpress_fuzz::text(data));
