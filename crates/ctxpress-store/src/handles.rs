//! The recall handles archived for one conversation: what the MCP server's
//! `history_outline` lists.
//!
//! Read from the search index: every `h:` record written with a
//! conversation id has a row there for each of its distinct texts (see
//! [`search::index_batch`](crate::search)), in the order of the
//! conversation within one write, later writes after earlier ones.

use crate::{SqliteArchive, StoreError};
use ctxpress_core::handle::Handle;
use rusqlite::{OptionalExtension, params};

/// One recall handle archived for a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandleEntry {
    /// The handle (`ctxpress recall` and the MCP `recall` tool take it).
    pub handle: Handle,
    /// How many original messages it stands for.
    pub messages: usize,
    /// The roles of its distinct messages, each with how many have it,
    /// most first (`-` for a message without a role).
    pub roles: Vec<(String, usize)>,
    /// The first original message's JSON text, as archived.
    pub first: String,
}

impl SqliteArchive {
    /// The recall handles archived for `conversation`, oldest write first
    /// (within one write in the order of the conversation): at most `limit`
    /// of them after skipping `offset`, and how many there are in all.
    pub fn handles(
        &self,
        conversation: &str,
        offset: usize,
        limit: usize,
    ) -> Result<(Vec<HandleEntry>, usize), StoreError> {
        let conn = self.lock();
        let keys: Vec<String> = conn
            .prepare_cached(
                "SELECT key FROM search_docs \
                 WHERE conversation = ?1 AND substr(key, 1, 2) = 'h:' \
                 GROUP BY key ORDER BY min(id)",
            )?
            .query_map([conversation], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let total = keys.len();
        let mut out = Vec::new();
        for key in keys.into_iter().skip(offset).take(limit) {
            let Some(handle) = key.strip_prefix("h:").and_then(Handle::parse) else {
                continue;
            };
            let len: Option<i64> = conn
                .prepare_cached("SELECT len FROM records WHERE key = ?1")?
                .query_row([&key], |r| r.get(0))
                .optional()?;
            let Some(len) = len else { continue };
            let roles = conn
                .prepare_cached(
                    "SELECT coalesce(role, '-'), count(*) FROM search_docs \
                     WHERE key = ?1 GROUP BY 1 ORDER BY 2 DESC, 1",
                )?
                .query_map([&key], |r| {
                    let n: i64 = r.get(1)?;
                    Ok((r.get::<_, String>(0)?, usize::try_from(n).unwrap_or(0)))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            let first: String = conn
                .prepare_cached(
                    "SELECT b.text FROM record_blobs rb JOIN blobs b ON b.hash = rb.hash \
                     WHERE rb.key = ?1 ORDER BY rb.pos LIMIT 1",
                )?
                .query_row(params![key], |r| r.get(0))
                .optional()?
                .unwrap_or_default();
            out.push(HandleEntry {
                handle,
                messages: usize::try_from(len).unwrap_or(0),
                roles,
                first,
            });
        }
        Ok((out, total))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxpress_core::archive::{Archive, Record};

    fn msg(role: &str, text: &str) -> String {
        serde_json::json!({"role": role, "content": text}).to_string()
    }

    fn rec(key: &str, originals: &[&String]) -> Record {
        Record {
            key: key.into(),
            originals: originals.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Two handles of one write sharing a message: both listed, in the
    /// order of the conversation (not of their digits), each with its
    /// count, roles and first message; the shared message found once; other
    /// conversations apart; offset and limit page.
    #[test]
    fn a_conversation_lists_its_handles_in_order() {
        let a = SqliteArchive::open_in_memory().unwrap();
        let m: Vec<String> = vec![
            msg("user", "start the gadget"),
            msg("assistant", "reading gadget.rs"),
            msg("tool", "fn gadget() { quokka }"),
            msg("assistant", "patched"),
        ];
        let (x, y) = (Handle::of(["x"]), Handle::of(["y"]));
        // `early` stands for messages 1-2, `late` for 2-3; `early` sorts
        // after `late` by its digits.
        let (early, late) = if x > y { (x, y) } else { (y, x) };
        a.put_for(
            Some("c1"),
            &[
                rec(&late.record_key(), &[&m[2], &m[3]]),
                rec(&early.record_key(), &[&m[1], &m[2]]),
                rec("doc:c1", &[&m[0], &m[1], &m[2], &m[3]]),
            ],
        )
        .unwrap();
        let other = Handle::of(["z"]);
        a.put_for(Some("c2"), &[rec(&other.record_key(), &[&m[0]])])
            .unwrap();

        let (list, total) = a.handles("c1", 0, 10).unwrap();
        assert_eq!(total, 2);
        let got: Vec<&Handle> = list.iter().map(|e| &e.handle).collect();
        assert_eq!(got, vec![&early, &late]);
        assert_eq!(list[0].messages, 2);
        assert_eq!(list[0].first, m[1]);
        assert_eq!(
            list[0].roles,
            vec![("assistant".to_string(), 1), ("tool".to_string(), 1)]
        );
        assert_eq!(list[1].first, m[2]);
        assert_eq!(list[1].roles.iter().map(|r| r.1).sum::<usize>(), 2);

        let hits = a.search("quokka", Some("c1"), 10).unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(hits[0].handle().as_ref(), Some(&early));

        let (page, total) = a.handles("c1", 1, 1).unwrap();
        assert_eq!((page.len(), total), (1, 2));
        assert_eq!(page[0].handle, late);
        let (list, total) = a.handles("c2", 0, 10).unwrap();
        assert_eq!((list.len(), total), (1, 1));
        assert_eq!(list[0].handle, other);
        assert_eq!(a.handles("nobody", 0, 10).unwrap().1, 0);
    }
}
