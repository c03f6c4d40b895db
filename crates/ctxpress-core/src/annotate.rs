//! Typed per-message annotations through which stages talk to each other.
//!
//! Annotations live beside the messages (keyed by [`MessageId`]) and are never
//! serialized into API output.

use crate::message::MessageId;
use serde::{Deserialize, Serialize};

/// Classification tier of a text (spec 001).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Tier {
    /// Structural content that summarization would destroy (or soft-T0 references).
    T0,
    /// Prose under 20 words.
    T2,
    /// Prose of 20 words or more.
    T3,
}

/// Why a text is T0. Hard reasons prevent compression, soft ones do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    // hard
    /// Markdown code fence.
    CodeFence,
    /// 4-space or tab indented code block.
    IndentedCode,
    /// JSON object or array.
    JsonStructure,
    /// YAML key-value lines.
    YamlStructure,
    /// More than 15% special characters.
    HighSpecialCharRatio,
    /// Line-length coefficient of variation above 1.2 with more than 3 lines.
    HighLineLengthVariance,
    /// An API key or other secret.
    ApiKey,
    /// LaTeX math.
    LatexMath,
    /// Unicode math symbols.
    UnicodeMath,
    /// SQL statements.
    SqlContent,
    /// Poetry or verse.
    VersePattern,
    /// A stack trace (Python, Java, Rust, Node, ...).
    ErrorTraceback,
    // soft
    /// HTTP(S) URL.
    Url,
    /// Email address.
    Email,
    /// Phone number.
    Phone,
    /// Version number such as v1.2.3.
    VersionNumber,
    /// 40-64 character hex string.
    HashOrSha,
    /// Unix-style path.
    FilePath,
    /// Dotted number sequence.
    IpOrSemver,
    /// JSON-style quoted key.
    QuotedKey,
    /// Legal language.
    LegalTerm,
    /// Quoted string longer than 10 chars.
    DirectQuote,
    /// Number with an SI unit.
    NumericWithUnits,
}

impl Reason {
    /// True for reasons that prevent compression.
    pub fn is_hard(self) -> bool {
        use Reason::*;
        matches!(
            self,
            CodeFence
                | IndentedCode
                | JsonStructure
                | YamlStructure
                | HighSpecialCharRatio
                | HighLineLengthVariance
                | ApiKey
                | LatexMath
                | UnicodeMath
                | SqlContent
                | VersePattern
                | ErrorTraceback
        )
    }

    /// The snake_case name used in configs and output.
    pub fn as_str(self) -> &'static str {
        use Reason::*;
        match self {
            CodeFence => "code_fence",
            IndentedCode => "indented_code",
            JsonStructure => "json_structure",
            YamlStructure => "yaml_structure",
            HighSpecialCharRatio => "high_special_char_ratio",
            HighLineLengthVariance => "high_line_length_variance",
            ApiKey => "api_key",
            LatexMath => "latex_math",
            UnicodeMath => "unicode_math",
            SqlContent => "sql_content",
            VersePattern => "verse_pattern",
            ErrorTraceback => "error_traceback",
            Url => "url",
            Email => "email",
            Phone => "phone",
            VersionNumber => "version_number",
            HashOrSha => "hash_or_sha",
            FilePath => "file_path",
            IpOrSemver => "ip_or_semver",
            QuotedKey => "quoted_key",
            LegalTerm => "legal_term",
            DirectQuote => "direct_quote",
            NumericWithUnits => "numeric_with_units",
        }
    }
}

/// Result of classifying one text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classification {
    /// The tier.
    pub tier: Tier,
    /// Hard T0 reasons found, sorted.
    pub hard: Vec<Reason>,
    /// Soft T0 reasons found, sorted.
    pub soft: Vec<Reason>,
}

/// What the message-level rules decided for a message (spec 000 section 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Keep verbatim.
    Preserve,
    /// Handled by the dedup path.
    Dedup,
    /// Summarize the prose, keep the code fences.
    CodeSplit,
    /// Eligible for compression.
    Compress,
}

/// Which rule produced a [`Decision`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DecisionRule {
    /// Role is in the preserve list.
    PreservedRole,
    /// Inside the recency window.
    RecencyWindow,
    /// Message carries tool calls.
    HasToolCalls,
    /// Content shorter than the minimum.
    ShortContent,
    /// Content is already a summary or truncation.
    AlreadyCompressed,
    /// Marked as duplicate by dedup.
    Duplicate,
    /// Code fences with enough prose to split.
    CodeWithProse,
    /// Code fences with little prose.
    CodeFences,
    /// Hard T0 content.
    HardT0,
    /// Valid JSON.
    ValidJson,
    /// No rule matched: compressible.
    Compressible,
}

/// A duplicate mark written by dedup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DupMark {
    /// The message kept as the canonical copy.
    pub keep: MessageId,
    /// Line-level similarity, 1.0 for exact duplicates.
    pub similarity: f64,
}

/// All annotations of one message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Annotations {
    /// Text classification, if the classifier ran.
    pub classification: Option<Classification>,
    /// Message-level decision and the rule that made it.
    pub decision: Option<(Decision, DecisionRule)>,
    /// Duplicate mark, if dedup found one.
    pub dup: Option<DupMark>,
    /// Set by any stage that wants later stages to leave the message alone.
    pub protected: bool,
    /// Ids of the messages this one replaces (set on messages a stage creates, such
    /// as a summary of several messages). Drives provenance and `expand`.
    pub replaces: Vec<MessageId>,
    /// The recall handles written in this message's markers, each with the
    /// messages it stands for (see [`crate::handle`]).
    pub handles: Vec<crate::handle::HandleMark>,
}
