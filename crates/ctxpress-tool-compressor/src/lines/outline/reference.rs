//! Reference implementations for the tests of the outline (the slow or
//! plain forms the faster code is compared with): [`declaration_reference`]
//! (a declaration without the first-byte exit nor the memo), SQL_COLUMN's
//! type names and the plain first word of a line.

use super::*;
use crate::lines::trim;

pub(super) fn first_word(body: &str) -> &str {
    word_at(body.trim_start())
}

/// [`declaration`] without its first-byte exit nor its memo (the reference
/// of the tests).
pub(super) fn declaration_reference(body: &str, lang: Lang, st: &mut OutlineState) -> Option<Rank> {
    declaration_of_trimmed(body, trim(body), lang, st, &mut LineRanks::default())
}

/// SQL_COLUMN's type names.
pub(super) const SQL_TYPES: &[&str] = &[
    "int",
    "integer",
    "bigint",
    "smallint",
    "tinyint",
    "serial",
    "bigserial",
    "varchar",
    "nvarchar",
    "char",
    "character",
    "text",
    "bool",
    "boolean",
    "date",
    "datetime",
    "time",
    "timestamp",
    "timestamptz",
    "uuid",
    "json",
    "jsonb",
    "decimal",
    "numeric",
    "float",
    "double",
    "real",
    "blob",
    "bytea",
    "enum",
    "money",
    "inet",
    "interval",
];
