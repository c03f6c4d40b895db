//! The hosts the proxy answers to: a `Host` header parsed, and the names
//! allowed besides loopback and the listening address (against DNS rebinding).

use std::net::SocketAddr;

use crate::config::ProxyError;

/// A `Host` (or an allowed host): its name, lowercased (IPv6 in brackets,
/// written the one way; a trailing dot dropped), and its port if it names
/// one. `None` when it is not a host.
pub(crate) fn parse_host(raw: &str) -> Option<(String, Option<u16>)> {
    let s = raw.trim().to_ascii_lowercase();
    let port = |p: &str| -> Option<Option<u16>> {
        match p {
            "" => Some(None),
            p => p.strip_prefix(':')?.parse().ok().map(Some),
        }
    };
    let (name, port) = if let Some(rest) = s.strip_prefix('[') {
        let end = rest.find(']')?;
        let ip: std::net::Ipv6Addr = rest[..end].parse().ok()?;
        (format!("[{ip}]"), port(&rest[end + 1..])?)
    } else {
        let (name, p) = match s.rfind(':') {
            Some(i) => (&s[..i], port(&s[i..])?),
            None => (s.as_str(), None),
        };
        let name = name.strip_suffix('.').unwrap_or(name);
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
        if name.is_empty() || !name.chars().all(ok) {
            return None;
        }
        (name.to_string(), p)
    };
    Some((name, port))
}

/// The `Host` names a request may carry. A web page whose DNS name its
/// author points at 127.0.0.1 (DNS rebinding) reaches a loopback proxy
/// with its own name in `Host`: refused, it cannot use the upstream with
/// the credentials in the upstream URL nor read the proxy's endpoints.
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    /// Every host is answered.
    pub(crate) any: bool,
    /// (name, port); a port of `None` stands for any.
    pub(crate) names: Vec<(String, Option<u16>)>,
}

impl Hosts {
    /// For a proxy listening on `local`: `localhost`, `127.0.0.1`, `[::1]`
    /// and the listening address, on its port, plus `allowed`; any host
    /// when `allowed` holds `*`, or is empty and `local` is beyond loopback.
    pub(crate) fn new(allowed: &[String], local: SocketAddr) -> Result<Self, ProxyError> {
        let port = Some(local.port());
        let mut names: Vec<(String, Option<u16>)> = ["localhost", "127.0.0.1", "[::1]"]
            .iter()
            .map(|n| (n.to_string(), port))
            .collect();
        if !local.ip().is_unspecified() {
            let own = match local.ip() {
                std::net::IpAddr::V4(ip) => ip.to_string(),
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            };
            if !names.iter().any(|(n, _)| *n == own) {
                names.push((own, port));
            }
        }
        let mut any = allowed.is_empty() && !local.ip().is_loopback();
        for a in allowed {
            if a.trim() == "*" {
                any = true;
                continue;
            }
            let h = parse_host(a).ok_or_else(|| ProxyError::AllowedHost(a.clone()))?;
            if !names.contains(&h) {
                names.push(h);
            }
        }
        Ok(Hosts { any, names })
    }

    /// True when a request naming `host` is answered (a `Host` without a
    /// port names port 80).
    pub(crate) fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let Some((name, port)) = parse_host(host) else {
            return false;
        };
        let port = port.unwrap_or(80);
        self.names
            .iter()
            .any(|(n, p)| *n == name && p.is_none_or(|p| p == port))
    }

    /// The names, as an error message lists them.
    pub(crate) fn shown(&self) -> String {
        let v: Vec<String> = self
            .names
            .iter()
            .map(|(n, p)| match p {
                Some(p) => format!("{n}:{p}"),
                None => n.clone(),
            })
            .collect();
        v.join(", ")
    }
}
