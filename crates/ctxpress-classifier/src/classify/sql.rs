//! SQL: upper-case keywords looked up by first letter and length as
//! 128-bit keys, statement shapes anchored at the statement words the
//! keyword pass found.

use crate::masks;
use ctxpress_text::bytes::is_word_byte;
use regex::Regex;
use std::sync::LazyLock;

use super::keywords::LowerWords;
use super::re;

/// Upper-case strong anchors (as written in SQL): one alone is SQL.
pub(crate) const SQL_STRONG_PATTERN: &str = concat!(
    r"(?-u:\b)(?:GROUP[ \t\r\n]+BY|ORDER[ \t\r\n]+BY|PRIMARY[ \t\r\n]+KEY|FOREIGN[ \t\r\n]+KEY|NOT[ \t\r\n]+NULL|VARCHAR|",
    r"INNER[ \t\r\n]+JOIN|LEFT[ \t\r\n]+(?:OUTER[ \t\r\n]+)?JOIN|RIGHT[ \t\r\n]+(?:OUTER[ \t\r\n]+)?JOIN|FULL[ \t\r\n]+OUTER[ \t\r\n]+JOIN|CROSS[ \t\r\n]+JOIN|",
    r"CREATE[ \t\r\n]+(?:TABLE|INDEX|VIEW|UNIQUE[ \t\r\n]+INDEX)|ALTER[ \t\r\n]+TABLE|DROP[ \t\r\n]+TABLE|INSERT[ \t\r\n]+INTO|",
    r"DELETE[ \t\r\n]+FROM|AUTO_INCREMENT|SELECT[ \t\r\n]+[^\n;]+?[ \t\r\n]+FROM[ \t\r\n]+[A-Za-z0-9_]+|UPDATE[ \t\r\n]+[A-Za-z0-9_]+[ \t\r\n]+SET)(?-u:\b)",
);

static SQL_STRONG: LazyLock<Regex> = LazyLock::new(|| re(SQL_STRONG_PATTERN));

/// First words of the [`SQL_STRONG`] alternatives.
const SQL_STRONG_FIRST: &[&str] = &[
    "GROUP",
    "ORDER",
    "PRIMARY",
    "FOREIGN",
    "NOT",
    "VARCHAR",
    "INNER",
    "LEFT",
    "RIGHT",
    "FULL",
    "CROSS",
    "CREATE",
    "ALTER",
    "DROP",
    "INSERT",
    "DELETE",
    "AUTO_INCREMENT",
    "SELECT",
    "UPDATE",
];

/// Statement shapes unmistakable in any case, anchored at a statement word
/// found by [`LowerWords`].
static SQL_ANY_CASE: LazyLock<Regex> =
    LazyLock::new(|| re(&format!("^(?i-u:{SQL_STATEMENT_SHAPES})")));

/// Statement shapes unmistakable in any case (without the case flag).
pub(crate) const SQL_STATEMENT_SHAPES: &str = concat!(
    r"select[ \t\r\n]+(?:\*|count[ \t\r\n]*\(|distinct[ \t\r\n])|insert[ \t\r\n]+into[ \t\r\n]+[A-Za-z0-9_]+[ \t\r\n]*(?:\(|values)",
    r"|create[ \t\r\n]+table[ \t\r\n]+(?:if[ \t\r\n]+not[ \t\r\n]+exists[ \t\r\n]+)?[A-Za-z0-9_]+[ \t\r\n]*\(|delete[ \t\r\n]+from[ \t\r\n]+[A-Za-z0-9_]+[ \t\r\n]+where[ \t\r\n]",
    r"|update[ \t\r\n]+[A-Za-z0-9_]+[ \t\r\n]+set[ \t\r\n]+[A-Za-z0-9_]+[ \t\r\n]*=",
);

pub(crate) const SQL_WEAK: &[&str] = &[
    "WHERE",
    "JOIN",
    "HAVING",
    "UNION",
    "DISTINCT",
    "EXCEPT",
    "INTERSECT",
];

pub(crate) const SQL_OTHER: &[&str] = &[
    "SELECT",
    "FROM",
    "INSERT",
    "INTO",
    "UPDATE",
    "DELETE",
    "SET",
    "VALUES",
    "CREATE",
    "TABLE",
    "DROP",
    "ALTER",
    "INDEX",
    "LIMIT",
    "OFFSET",
    "VIEW",
    "SCHEMA",
    "FETCH",
    "COMMIT",
    "ROLLBACK",
    "TRIGGER",
    "PROCEDURE",
    "DATABASE",
    "GRANT",
    "REVOKE",
    "TRUNCATE",
    "BETWEEN",
    "LIKE",
];

/// Upper-case SQL keywords written as whole words.
#[derive(Default)]
pub(super) struct SqlKeywords {
    /// Bit `k` for the `k`-th keyword of [`SQL_WEAK`] then [`SQL_OTHER`].
    seen: u64,
    /// Some word of [`SQL_STRONG_FIRST`].
    strong: bool,
}

/// A word of at most 16 bytes as one number (zero-padded).
const fn word_key(w: &[u8]) -> u128 {
    let mut k = 0u128;
    let mut i = 0;
    while i < w.len() && i < 16 {
        k |= (w[i] as u128) << (8 * i);
        i += 1;
    }
    k
}

/// How many keywords [`SqlKeywords::seen`] has bits for.
const SQL_SEEN_N: usize = SQL_WEAK.len() + SQL_OTHER.len();

/// The `i`-th word of [`SQL_WEAK`], [`SQL_OTHER`] (the bit order of
/// [`SqlKeywords::seen`]), then [`SQL_STRONG_FIRST`].
const fn sql_word(i: usize) -> &'static [u8] {
    if i < SQL_WEAK.len() {
        SQL_WEAK[i].as_bytes()
    } else if i < SQL_SEEN_N {
        SQL_OTHER[i - SQL_WEAK.len()].as_bytes()
    } else {
        SQL_STRONG_FIRST[i - SQL_SEEN_N].as_bytes()
    }
}

/// [`word_key`]s of the [`sql_word`]s.
static SQL_KEYS: [u128; SQL_SEEN_N + SQL_STRONG_FIRST.len()] = {
    let mut t = [0u128; SQL_SEEN_N + SQL_STRONG_FIRST.len()];
    let mut i = 0;
    while i < t.len() {
        t[i] = word_key(sql_word(i));
        i += 1;
    }
    t
};

const _: () = assert!(SQL_KEYS.len() <= 64);

/// Longest [`sql_word`] (words are compared as `u128`s).
const SQL_MAX_LEN: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < SQL_KEYS.len() {
        if sql_word(i).len() > n {
            n = sql_word(i).len();
        }
        i += 1;
    }
    assert!(n <= 16);
    n
};

/// By first capital and length: bit `i` set when [`SQL_KEYS`]`[i]` has that
/// shape. Most upper-case words have no candidate at all.
static SQL_SHAPES: [[u64; SQL_MAX_LEN + 1]; 26] = {
    let mut t = [[0u64; SQL_MAX_LEN + 1]; 26];
    let mut i = 0;
    while i < SQL_KEYS.len() {
        let w = sql_word(i);
        t[(w[0] - b'A') as usize][w.len()] |= 1 << i;
        i += 1;
    }
    t
};

/// The keywords among the whole words of three or more upper-case letters
/// (from the upper-case mask; every keyword is such a word).
pub(super) fn sql_keywords(b: &[u8], upper: &[u64]) -> SqlKeywords {
    let mut k = SqlKeywords::default();
    let mut carry = 0u64;
    for (w, &x) in upper.iter().enumerate() {
        let next = upper.get(w + 1).copied().unwrap_or(0);
        let three = x & ((x >> 1) | (next << 63)) & ((x >> 2) | (next << 62));
        // runs of upper-case letters that start here
        let mut starts = three & !((x << 1) | carry);
        carry = x >> 63;
        while starts != 0 {
            let p = w * 64 + starts.trailing_zeros() as usize;
            starts &= starts - 1;
            if p > 0 && b.get(p - 1).is_some_and(|&c| is_word_byte(c)) {
                continue;
            }
            let mut e = masks::run_end(upper, p);
            if b.get(e).is_some_and(|&c| is_word_byte(c)) {
                // the word goes on past its capitals (`AUTO_INCREMENT`, `HTTPServer`)
                e = p + b.get(p..).map_or(0, |r| {
                    r.iter()
                        .take(SQL_MAX_LEN + 1)
                        .take_while(|&&c| is_word_byte(c))
                        .count()
                });
            }
            let mut candidates = b
                .get(p)
                .and_then(|c| SQL_SHAPES.get(usize::from(c.wrapping_sub(b'A'))))
                .and_then(|by_len| by_len.get(e - p))
                .copied()
                .unwrap_or(0);
            if candidates == 0 {
                continue;
            }
            let key = word_key(b.get(p..e).unwrap_or(&[]));
            while candidates != 0 {
                let i = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                if SQL_KEYS.get(i) == Some(&key) {
                    if i < SQL_SEEN_N {
                        k.seen |= 1 << i;
                    } else {
                        k.strong = true;
                    }
                }
            }
        }
    }
    k
}

/// Whether the six-letter statement word at `p` is followed by whitespace
/// and a byte that can begin the rest of its [`SQL_ANY_CASE`] shape
/// (`select *|count|distinct`, `insert into`, `create table`, `delete from`,
/// `update name`): most statement words are English or code, not SQL.
fn statement_continues(b: &[u8], p: usize) -> bool {
    let end = p + 6;
    let ws = b.get(end..).map_or(0, |r| {
        r.iter()
            .take_while(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
            .count()
    });
    let Some(next) = b.get(end + ws).map(u8::to_ascii_lowercase) else {
        return false;
    };
    ws > 0
        && match b.get(p).map(u8::to_ascii_lowercase) {
            Some(b's') => matches!(next, b'*' | b'c' | b'd'),
            Some(b'i') => next == b'i',
            Some(b'c') => next == b't',
            Some(b'd') => next == b'f',
            _ => is_word_byte(next),
        }
}

/// Strong anchors, or three distinct keywords one of which is weak.
pub(super) fn is_sql(text: &str, words: &LowerWords, k: &SqlKeywords) -> bool {
    let b = text.as_bytes();
    let starts_word = |p: usize| p == 0 || b.get(p - 1).is_none_or(|&c| !is_word_byte(c));
    for &p in &words.statements {
        if starts_word(p)
            && statement_continues(b, p)
            && text.get(p..).is_some_and(|r| SQL_ANY_CASE.is_match(r))
        {
            return true;
        }
    }
    let weak = (1u64 << SQL_WEAK.len()) - 1;
    (k.seen & weak != 0 && k.seen.count_ones() >= 3) || (k.strong && SQL_STRONG.is_match(text))
}
