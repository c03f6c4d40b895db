//! A tiny HTTP/1.1 server for tests: one request per connection, scripted
//! replies, every request recorded.
#![allow(dead_code)]

use serde_json::Value;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the stub answers to one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A canned answer.
    Canned {
        status: u16,
        body: String,
        headers: Vec<(String, String)>,
        delay: Duration,
    },
    /// Pass the request on to `{base}{path-after-/v1}` and relay the answer.
    Forward(String),
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::raw(status, &body.to_string())
    }
    pub fn raw(status: u16, body: &str) -> Reply {
        Reply::Canned {
            status,
            body: body.to_string(),
            headers: Vec::new(),
            delay: Duration::ZERO,
        }
    }
    /// A chat-completions answer with `content`.
    pub fn chat(content: &str) -> Reply {
        Reply::json(
            200,
            serde_json::json!({
                "id": "chatcmpl-1", "object": "chat.completion", "model": "stub",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": content}}]
            }),
        )
    }
    pub fn with_header(mut self, k: &str, v: &str) -> Reply {
        if let Reply::Canned { headers, .. } = &mut self {
            headers.push((k.into(), v.into()));
        }
        self
    }
    pub fn delayed(mut self, d: Duration) -> Reply {
        if let Reply::Canned { delay, .. } = &mut self {
            *delay = d;
        }
        self
    }
}

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub at: Instant,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

type Script = dyn Fn(usize, &Seen) -> Reply + Send + Sync;

/// A running stub.
pub struct Stub {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Stub {
    /// Start a stub; `script(n, request)` answers the n-th request (0-based).
    pub async fn start(script: impl Fn(usize, &Seen) -> Reply + Send + Sync + 'static) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let script: Arc<Script> = Arc::new(script);
        let seen2 = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let (seen, script) = (seen2.clone(), script.clone());
                tokio::spawn(async move {
                    let _ = serve(sock, seen, script).await;
                });
            }
        });
        Stub { addr, seen, task }
    }

    /// Base URL as a client would configure it.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Requests received so far.
    pub fn hits(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Copies of the requests received so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(
    mut sock: TcpStream,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Script>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let path = request_line.split(' ').nth(1).unwrap_or("/").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body_end = (head_end + len).min(buf.len());
    let body = serde_json::from_slice(&buf[head_end..body_end]).unwrap_or(Value::Null);
    let req = Seen {
        path,
        headers,
        body,
        at: Instant::now(),
    };
    let n = {
        let mut s = seen.lock().unwrap();
        s.push(req.clone());
        s.len() - 1
    };
    let (status, body, extra) = match script(n, &req) {
        Reply::Canned {
            status,
            body,
            headers,
            delay,
        } => {
            tokio::time::sleep(delay).await;
            (status, body, headers)
        }
        Reply::Forward(base) => {
            let rest = req.path.strip_prefix("/v1").unwrap_or(&req.path);
            let resp = reqwest::Client::new()
                .post(format!("{base}{rest}"))
                .json(&req.body)
                .send()
                .await;
            match resp {
                Ok(r) => {
                    let status = r.status().as_u16();
                    (status, r.text().await.unwrap_or_default(), Vec::new())
                }
                Err(e) => (502, e.to_string(), Vec::new()),
            }
        }
    };
    let mut out = format!(
        "HTTP/1.1 {status} Stub\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    for (k, v) in extra {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("\r\n");
    out.push_str(&body);
    sock.write_all(out.as_bytes()).await?;
    sock.shutdown().await
}
