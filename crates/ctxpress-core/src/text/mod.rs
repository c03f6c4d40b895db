//! Text rules the strategies share, one answer each: what a code fence is
//! and how a text splits into prose and code ([`fence`]), which words are
//! identifiers, paths and versions ([`ident`] for one token, [`entities`]
//! for spans in running text, [`terms`] for the information-bearing terms
//! of a text), and the byte classes those scans use ([`bytes`], with the
//! SSE2 lane helpers in `sse2` on x86-64), and `str::lines` by `memchr`
//! ([`lines`]). The
//! classifier and the summarizer read them from here.

pub mod bytes;
pub mod entities;
pub mod fence;
pub mod ident;
pub mod lines;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
pub mod sse2;
pub mod terms;

pub use entities::ascii_regex;
pub use fence::{CodeSplit, Fence, Segment, has_code_fence, split_code_and_prose};
pub use terms::{for_each_term, term_counts, term_spans};
