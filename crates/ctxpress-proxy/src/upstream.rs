//! The upstream URL parsed once, and a request path normalized into the
//! upstream path it goes to (or refused).

use crate::config::{ProxyError, shown_url};

/// The upstream, parsed once.
pub(crate) struct Upstream {
    /// `scheme://authority/path`, without a trailing `/` or a query.
    base: String,
    /// The base path ends in `/v1`: `/v1/X` goes to `BASE/X`.
    v1: bool,
    /// The base URL's query, sent on every request.
    query: Option<String>,
    /// Its parameter names, decoded: a client's parameter of one of these
    /// names is dropped.
    names: Vec<String>,
    /// For messages.
    pub(crate) shown: String,
}

impl Upstream {
    pub(crate) fn parse(s: &str) -> Result<Self, ProxyError> {
        let bad = || ProxyError::Upstream(shown_url(s));
        let mut url = reqwest::Url::parse(s).map_err(|_| bad())?;
        if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
            return Err(bad());
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err(bad());
        }
        let query = url.query().filter(|q| !q.is_empty()).map(str::to_string);
        let names = query
            .as_deref()
            .map(|q| q.split('&').map(param_name).collect())
            .unwrap_or_default();
        url.set_query(None);
        url.set_fragment(None);
        let base = url.as_str().trim_end_matches('/').to_string();
        let v1 = url.path().trim_end_matches('/').ends_with("/v1");
        Ok(Upstream {
            shown: shown_url(s),
            base,
            v1,
            query,
            names,
        })
    }

    /// The URL a request for the normalized API path `segments` (starting
    /// with `v1`) goes to, with the client's query after the upstream's.
    pub(crate) fn url(&self, segments: &[String], client_query: Option<&str>) -> String {
        let rest = if self.v1 {
            segments.get(1..).unwrap_or_default()
        } else {
            segments
        };
        let mut url = self.base.clone();
        for s in rest {
            url.push('/');
            url.push_str(s);
        }
        let mut params: Vec<&str> = self.query.iter().map(String::as_str).collect();
        for p in client_query.unwrap_or("").split('&') {
            if !p.is_empty() && !self.names.contains(&param_name(p)) {
                params.push(p);
            }
        }
        if !params.is_empty() {
            url.push('?');
            url.push_str(&params.join("&"));
        }
        url
    }
}

/// The decoded name of a `name=value` query parameter.
fn param_name(pair: &str) -> String {
    let name = pair.split('=').next().unwrap_or("").replace('+', " ");
    String::from_utf8_lossy(&percent_decode(name.as_bytes()).unwrap_or_default()).into_owned()
}

fn percent_decode(raw: &[u8]) -> Option<Vec<u8>> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' {
            let hi = hex(*raw.get(i + 1)?)?;
            let lo = hex(*raw.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(raw[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Where a request path leads.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// Under `/v1`: its normalized segments, `v1` first.
    Api(Vec<String>),
    /// A well-formed path outside `/v1`.
    Outside,
    /// Malformed, or climbing out of `/v1`: never forwarded.
    Bad(&'static str),
}

/// Normalize a request path (as sent, percent-encoded): decode it once,
/// read `\` as `/`, drop empty and `.` segments, apply `..`. What is left
/// must be plain ASCII segments (letters, digits, `-._~!$&'()*+,=:@`; no
/// `;`, which some servers read as the end of a segment, as in `..;`): a
/// `%` left after decoding (double encoding), a control character, a
/// non-ASCII character (look-alike dots among them), or a segment of dots
/// only is refused, so that no server behind can read the path another
/// way.
pub(crate) fn target(raw: &str) -> Target {
    let Some(bytes) = percent_decode(raw.as_bytes()) else {
        return Target::Bad("malformed percent-encoding");
    };
    let Ok(path) = String::from_utf8(bytes) else {
        return Target::Bad("not UTF-8");
    };
    let mut segs: Vec<String> = Vec::new();
    let mut climbed = false;
    for seg in path.split(['/', '\\']) {
        match seg {
            "" | "." => {}
            ".." => {
                climbed = true;
                if segs.pop().is_none() {
                    return Target::Bad("climbs above the root");
                }
            }
            s if s.bytes().all(|b| b == b'.') => return Target::Bad("a segment of dots"),
            s if s
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,=:@".contains(&b)) =>
            {
                segs.push(s.to_string())
            }
            _ => return Target::Bad("characters not allowed in an API path"),
        }
    }
    match segs.first().map(String::as_str) {
        Some("v1") => Target::Api(segs),
        _ if climbed => Target::Bad("climbs out of /v1"),
        _ => Target::Outside,
    }
}
