//! One message with 20,000 content blocks (issue #33): an assistant turn of
//! 20,000 parallel `tool_use` calls and the user message with their 20,000
//! `tool_result` blocks go through the `agent` preset (with an archive),
//! `validate` and `expand`. While each result was looked up by a scan of the
//! message's blocks this cost N² (10,000 blocks took 17 s in release, this
//! test minutes in debug); linear, it takes about two seconds in debug. The
//! time is not asserted (it depends on the machine): `cargo bench -p
//! ctxpress-benches --bench blocks` shows the time per block staying flat
//! from 1,000 to 16,000 blocks.

use ctxpress::core::archive::MemoryArchive;
use ctxpress::core::fixtures::many_blocks;
use ctxpress::{Compressor, Conversation, expand, validate};
use std::sync::Arc;

#[test]
fn twenty_thousand_blocks_in_one_message_compress_validate_and_expand() {
    let n = 20_000;
    let conv = many_blocks(n);
    assert_eq!(conv.messages[1].tool_calls().len(), n);
    assert_eq!(conv.messages[2].tool_results().len(), n);
    assert!(validate(&conv).is_empty());
    let arch = Arc::new(MemoryArchive::new());
    let c = Compressor::preset("agent")
        .unwrap()
        .with_archive(Some(arch.clone()));
    let mut out = conv.clone();
    c.compress(&mut out).unwrap();
    assert!(validate(&out).is_empty());
    let written = Conversation::parse(&out.to_json_string()).unwrap();
    let back = expand(&written, arch.as_ref()).unwrap();
    assert_eq!(back.to_json_string(), conv.to_json_string());
}
