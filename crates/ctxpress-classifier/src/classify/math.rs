//! Math: LaTeX (`$...$`, `$$`, `\\begin{...}`, commands) matched by hand at
//! each `$` and `\\`, and runs of Unicode math symbols.

use ctxpress_text::bytes::is_word_byte;

/// A command name of the `\\name` alternative of the reference's LaTeX
/// pattern.
fn is_latex_command(name: &[u8]) -> bool {
    matches!(
        name,
        b"frac"
            | b"dfrac"
            | b"sqrt"
            | b"sum"
            | b"prod"
            | b"int"
            | b"iint"
            | b"oint"
            | b"lim"
            | b"mathbb"
            | b"mathrm"
            | b"mathcal"
            | b"alpha"
            | b"beta"
            | b"gamma"
            | b"delta"
            | b"epsilon"
            | b"theta"
            | b"lambda"
            | b"sigma"
            | b"omega"
            | b"infty"
            | b"partial"
            | b"nabla"
            | b"cdot"
            | b"leq"
            | b"geq"
            | b"neq"
            | b"approx"
            | b"forall"
            | b"exists"
    )
}

/// The first position at or after `from` of `needle` or `stop` (`None`
/// when neither follows), cached in `at`: with growing `from` every byte is
/// looked at once, so many openers before one closer stay linear.
fn next_of(
    b: &[u8],
    at: &mut Option<Option<usize>>,
    from: usize,
    needle: u8,
    stop: u8,
) -> Option<usize> {
    if let Some(cached) = *at
        && cached.is_none_or(|q| q >= from)
    {
        return cached;
    }
    let found = b
        .get(from..)
        .and_then(|r| memchr::memchr2(needle, stop, r))
        .map(|q| from + q);
    *at = Some(found);
    found
}

/// The length of the UTF-8 sequence a lead byte starts (1 for others).
fn utf8_len(lead: u8) -> usize {
    match lead {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

/// Some match of the reference's LaTeX pattern is math, found by hand at each
/// `$` and `\` (the reference's answer without a regex over the text): every
/// match that starts with `\`, `$$` or is `$x$` is math; an inline `$...$` is
/// math when [`inline_math`] says so, and otherwise the search resumes after
/// it, as the regex's would.
pub(super) fn has_latex(text: &str) -> bool {
    let b = text.as_bytes();
    let (mut bracket, mut paren) = (None, None);
    let mut from = 0;
    for p in memchr::memchr2_iter(b'$', b'\\', b) {
        if p < from {
            continue;
        }
        let byte = |i: usize| b.get(i).copied().unwrap_or(0);
        if byte(p) == b'\\' {
            let found = match byte(p + 1) {
                // `\[[^\]]+\\\]`, `\([^)\n]+\\\)`
                b'[' => next_of(b, &mut bracket, p + 2, b']', b']')
                    .is_some_and(|q| q >= p + 4 && byte(q - 1) == b'\\'),
                b'(' => next_of(b, &mut paren, p + 2, b')', b'\n')
                    .is_some_and(|q| q >= p + 4 && byte(q) == b')' && byte(q - 1) == b'\\'),
                _ => {
                    let rest = b.get(p + 1..).unwrap_or(&[]);
                    let n = rest.iter().take_while(|&&c| is_word_byte(c)).count();
                    let name = rest.get(..n).unwrap_or(&[]);
                    is_latex_command(name)
                        || (name == b"begin" && latex_environment(rest.get(n..).unwrap_or(&[])))
                }
            };
            if found {
                return true;
            }
            continue;
        }
        let Some(&after) = b.get(p + 1) else {
            continue;
        };
        if after == b'$' {
            // `\$\$[^$]+\$\$`: the closing pair is the next `$`
            let q = memchr::memchr(b'$', b.get(p + 2..).unwrap_or(&[])).map(|q| p + 2 + q);
            if q.is_some_and(|q| q >= p + 3 && byte(q + 1) == b'$') {
                return true;
            }
        } else if after.is_ascii_alphabetic() && byte(p + 2) == b'$' {
            return true;
        } else if !matches!(
            after,
            b' ' | b'\t' | b'\r' | b'\n' | b'0'..=b'9' | b'{' | b'('
        ) {
            // `\$[^[ \t\r\n]$[0-9]{(][^$\n]*?[^[ \t\r\n]$\\]\$`: up to the next `$`
            let Some(q) =
                memchr::memchr2(b'$', b'\n', b.get(p + 2..).unwrap_or(&[])).map(|q| p + 2 + q)
            else {
                continue;
            };
            if byte(q) == b'$'
                && q > p + 1 + utf8_len(after)
                && !matches!(byte(q - 1), b' ' | b'\t' | b'\r' | b'\n' | b'$' | b'\\')
            {
                if inline_math(b, p + 1, q) {
                    return true;
                }
                from = q + 1;
            }
        }
    }
    false
}

/// `{env}` or `{env*}` after `\begin`, for the display-math environments.
fn latex_environment(rest: &[u8]) -> bool {
    let Some(inner) = rest.strip_prefix(b"{") else {
        return false;
    };
    let n = inner.iter().take_while(|c| c.is_ascii_lowercase()).count();
    let name = inner.get(..n).unwrap_or(&[]);
    let tail = inner.get(n..).unwrap_or(&[]);
    matches!(
        name,
        b"equation" | b"align" | b"gather" | b"math" | b"displaymath" | b"multline"
    ) && (tail.starts_with(b"}") || tail.starts_with(b"*}"))
}

/// An inline `$...$` (inner bytes `a..q`, closing `$` at `q`) is math when its
/// inside has math syntax and no identifier follows (`$A_B $C` in shell is not).
fn inline_math(b: &[u8], a: usize, q: usize) -> bool {
    b.get(a..q).is_some_and(|inner| {
        inner
            .iter()
            .any(|c| matches!(c, b'\\' | b'^' | b'_' | b'=' | b'{' | b'+'))
    }) && !b.get(q + 1).is_some_and(u8::is_ascii_alphanumeric)
}

const MATH_SYMBOLS: &[char] = &[
    '∑', '∏', '∫', '∬', '∮', '∂', '∇', '√', '∞', '≠', '≈', '≡', '≤', '≥', '∈', '∉', '∋', '⊂', '⊃',
    '⊆', '⊇', '∪', '∩', '∀', '∃', '∄', '∅', '∧', '∨', '⊕', '⊗', 'ℝ', 'ℕ', 'ℤ', 'ℚ', 'ℂ', '∝', '∠',
    '⊥', '∴', '∵', '∘', '⊢', '⊨',
];

/// Second bytes of the UTF-8 of [`MATH_SYMBOLS`] (all `0xE2 ..`): most
/// `0xE2` characters in text (quotes, dashes, box drawing) fail this.
static MATH_SECOND: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < MATH_SYMBOLS.len() {
        let c = MATH_SYMBOLS[i] as u32;
        assert!(c >= 0x2000 && c <= 0x2FFF);
        t[(0x80 | ((c >> 6) & 0x3F)) as usize] = true;
        i += 1;
    }
    t
};

/// Two or more mathematical symbols (a single `≥` in prose is not math).
pub(crate) fn has_unicode_math(text: &str) -> bool {
    let b = text.as_bytes();
    let mut n = 0;
    for p in memchr::memchr_iter(0xE2, b) {
        if !b.get(p + 1).is_some_and(|&c| MATH_SECOND[c as usize]) {
            continue;
        }
        if let Some(c) = text.get(p..).and_then(|s| s.chars().next())
            && MATH_SYMBOLS.contains(&c)
        {
            n += 1;
            if n >= 2 {
                return true;
            }
        }
    }
    false
}
