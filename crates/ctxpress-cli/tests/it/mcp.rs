//! `ctxpress mcp` as an MCP client sees it: JSON-RPC over stdio
//! (initialize, tools/list, `search_history` finding a word of the evicted
//! middle of a compressed session, `recall` giving it back exactly, paged,
//! `history_outline`, tool errors for bad handles and requests over the
//! bounds, exit 0 when stdin closes), and over streamable HTTP with
//! `--listen` and on `ctxpress serve --mcp` (the token required, 401
//! without it). Every server listens on 127.0.0.1, is bounded in time and
//! stopped. Built with the cargo feature `mcp` (`.ci/run` runs it:
//! `cargo test -p ctxpress-cli --features mcp --test it -- mcp::`);
//! without it, `mcp_off` checks what the commands say instead.
#![cfg(feature = "mcp")]
#![allow(missing_docs)]

use crate::common::{BIN, bin, data, free_port};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// A class name read in an exchange that the 8,000-token budget moves out
/// of the context.
const WORD: &str = "TimeCapsule";
const CONVERSATION: &str = "sweagent-3ff21d43335a";

/// An archive of the shipped SWE-agent trajectories compressed to 8,000
/// tokens, in a temporary folder.
fn archive() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("a.db");
    let out = dir.path().join("out.jsonl");
    bin()
        .args(["compress", "--budget", "8000", "--archive"])
        .arg(&db)
        .arg("-o")
        .arg(&out)
        .arg(data("swe_agent.jsonl"))
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("#h"), "the markers carry handles");
    (dir, db)
}

/// `ctxpress mcp` on stdio, one JSON-RPC message a line.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next: u64,
}

impl Client {
    fn start(db: &Path) -> Client {
        let mut child = Command::new(BIN)
            .args(["mcp", "--archive"])
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Client {
            child,
            stdin,
            lines,
            next: 1,
        }
    }

    fn send(&mut self, v: &Value) {
        let s = self.stdin.as_mut().unwrap();
        writeln!(s, "{v}").unwrap();
        s.flush().unwrap();
    }

    /// Send a request and wait (20 s at most) for its answer.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to {method} within 20 s"));
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout holds only JSON-RPC: {e}: {line}"));
            if v["id"] == json!(id) {
                return v;
            }
        }
    }

    /// `tools/call`: the result (an MCP tool error has `isError`).
    fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        assert!(r.get("error").is_none(), "{r}");
        r["result"].clone()
    }

    /// Close stdin and wait (15 s at most) for the exit.
    fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            if start.elapsed() > Duration::from_secs(15) {
                let _ = self.child.kill();
                panic!("ctxpress mcp did not exit within 15 s of stdin closing");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn text(result: &Value, i: usize) -> &str {
    result["content"][i]["text"].as_str().unwrap_or("")
}

fn is_error(result: &Value) -> bool {
    result["isError"] == json!(true)
}

fn initialize(c: &mut Client) -> Value {
    let r = c.request(
        "initialize",
        json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "ctxpress-test", "version": "1"}
        }),
    );
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    r
}

/// The handle of the best hit for WORD, checked as search_history gives it.
fn found_handle(c: &mut Client) -> String {
    let r = c.call(
        "search_history",
        json!({"query": WORD, "conversation": CONVERSATION, "limit": 5}),
    );
    assert!(!is_error(&r), "{r}");
    let v: Value = serde_json::from_str(text(&r, 0)).unwrap();
    let hits = v["hits"].as_array().unwrap();
    assert!(!hits.is_empty() && hits.len() <= 5, "{v}");
    let hit = hits
        .iter()
        .find(|h| h["handle"].is_string())
        .unwrap_or_else(|| panic!("a hit under a handle: {v}"));
    assert!(
        hit["snippet"]
            .as_str()
            .unwrap()
            .contains(&format!("«{WORD}»")),
        "{hit}"
    );
    assert_eq!(hit["conversation"], CONVERSATION);
    assert!(hit["where"]["key"].is_string() && hit["where"]["pos"].is_u64());
    hit["handle"].as_str().unwrap().to_string()
}

#[test]
fn stdio_round_trip() {
    let (_dir, db) = archive();
    let mut c = Client::start(&db);
    let init = initialize(&mut c);
    assert_eq!(init["result"]["serverInfo"]["name"], "ctxpress", "{init}");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );

    let list = c.request("tools/list", json!({}));
    let tools = list["result"]["tools"].as_array().unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(names, ["history_outline", "recall", "search_history"]);
    for t in tools {
        assert!(t["description"].as_str().unwrap().contains("64 KiB"), "{t}");
        assert_eq!(t["inputSchema"]["type"], "object");
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{t}");
    }

    let handle = found_handle(&mut c);
    // The pages put together are exactly what `ctxpress recall --text` prints.
    let want = bin()
        .args(["recall", &handle, "--text", "--archive"])
        .arg(&db)
        .assert()
        .success();
    let want = String::from_utf8(want.get_output().stdout.clone()).unwrap();
    assert!(want.contains(WORD));
    let (mut got, mut offset, mut pages) = (String::new(), 0u64, 0);
    loop {
        let r = c.call(
            "recall",
            json!({"handle": handle, "offset": offset, "max_chars": 2000}),
        );
        assert!(!is_error(&r), "{r}");
        assert!(text(&r, 0).starts_with(&handle), "{r}");
        let page = text(&r, 1);
        assert!(page.chars().count() <= 2000);
        got.push_str(page);
        pages += 1;
        let Some(next) = r["content"].get(2) else {
            break;
        };
        let next = next["text"].as_str().unwrap();
        let at = next.find("\"offset\": ").expect("the next offset") + 10;
        offset = next[at..]
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(pages < 1000);
    }
    assert_eq!(got, want);
    // Without paging arguments: the first page, 16,000 characters at most.
    let r = c.call("recall", json!({"handle": handle.trim_start_matches('#')}));
    assert!(!is_error(&r), "{r}");
    assert!(want.starts_with(text(&r, 1)));

    let r = c.call("history_outline", json!({"conversation": CONVERSATION}));
    assert!(!is_error(&r), "{r}");
    let outline: Value = serde_json::from_str(text(&r, 0)).unwrap();
    let entry = outline["handles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["handle"] == json!(handle))
        .unwrap_or_else(|| panic!("{handle} in the outline: {outline}"));
    assert!(entry["messages"].as_u64().unwrap() >= 1, "{entry}");
    assert!(entry["roles"].is_object() && entry["preview"].is_string());
    // What the compressed history showed in the handle's place.
    let note = entry["note"].as_str().unwrap_or_else(|| panic!("{entry}"));
    assert!(note.contains(&handle), "{note}");
    assert!(outline["batches"].is_array());
    // The session ledger the 8,000-token budget wrote.
    let ledger = outline["ledger"]
        .as_str()
        .unwrap_or_else(|| panic!("{outline}"));
    assert!(ledger.starts_with("[session ledger:"), "{ledger:.200}");
    assert!(
        ledger.contains("# files") || ledger.contains("# commands"),
        "{ledger}"
    );

    // Bad handles and requests over the bounds are tool errors that say why.
    let big = "x".repeat(10_000);
    for (tool, args, says) in [
        ("recall", json!({"handle": "#hxyz"}), "not a handle"),
        ("recall", json!({"handle": "src/main.rs"}), "not a handle"),
        ("recall", json!({"handle": "#h0000000000"}), "no originals"),
        ("recall", json!({}), "missing field `handle`"),
        (
            "recall",
            json!({"handle": handle, "max_chars": 1_000_000_000u64}),
            "between 1 and 32000",
        ),
        (
            "recall",
            json!({"handle": handle, "offset": 1_000_000_000u64}),
            "past the end",
        ),
        (
            "search_history",
            json!({"query": WORD, "limit": 10_000}),
            "between 1 and 50",
        ),
        (
            "search_history",
            json!({"query": WORD, "limit": 0}),
            "between 1 and 50",
        ),
        (
            "search_history",
            json!({"query": WORD, "limit": "ten"}),
            "invalid arguments",
        ),
        ("search_history", json!({"query": big}), "at most 4096"),
        ("search_history", json!({"query": "!!"}), "no word"),
        (
            "search_history",
            json!({"query": WORD, "colour": "red"}),
            "unknown field",
        ),
        (
            "history_outline",
            json!({"conversation": "no-such-conversation"}),
            "nothing is archived",
        ),
    ] {
        let r = c.call(tool, args.clone());
        assert!(is_error(&r), "{tool} {args}: {r}");
        assert!(text(&r, 0).contains(says), "{tool} {args}: {r}");
    }
    // An unknown tool is a protocol error.
    let r = c.request(
        "tools/call",
        json!({"name": "delete_history", "arguments": {}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");

    let st = c.close();
    assert!(st.success(), "{st:?}");
}

#[test]
fn a_missing_archive_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("none.db");
    let o = bin().args(["mcp", "--archive"]).arg(&db).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such archive"));
    assert!(!db.exists(), "not created");
}

/// Wait (20 s at most) until 127.0.0.1:`port` accepts.
fn wait_for(port: u16, child: &mut Child) {
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("the server exited: {st:?}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One HTTP/1.1 POST of `body` to `/mcp` on 127.0.0.1:`port`: the status
/// and the answer's body (JSON, or the data of an event stream).
fn post(
    port: u16,
    auth: Option<&str>,
    session: Option<&str>,
    body: &Value,
) -> (u16, String, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let body = body.to_string();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n",
        body.len()
    );
    if let Some(t) = auth {
        head.push_str(&format!("authorization: Bearer {t}\r\n"));
    }
    if let Some(id) = session {
        head.push_str(&format!("mcp-session-id: {id}\r\n"));
    }
    s.write_all(format!("{head}\r\n{body}").as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let status = raw[9..12].parse().unwrap();
    let (headers, rest) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let session = headers
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    let chunked = headers
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    // An event stream: the JSON is on its `data:` lines.
    let data: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let body = if data.is_empty() {
        body
    } else {
        data.join("\n")
    };
    (status, body, session)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn init_body() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "ctxpress-test", "version": "1"}
    }})
}

/// Over HTTP: 401 without the token or with another; with it, initialize
/// and a search that finds WORD under a handle.
fn http_checks(port: u16, token: &str) {
    let (st, body, _) = post(port, None, None, &init_body());
    assert_eq!(st, 401, "{body}");
    let (st, body, _) = post(port, Some("tok-wrong"), None, &init_body());
    assert_eq!(st, 401, "{body}");
    let (st, body, session) = post(port, Some(token), None, &init_body());
    assert_eq!(st, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(v["result"]["serverInfo"]["name"], "ctxpress", "{v}");
    let session = (!session.is_empty()).then_some(session);
    let (st, body, _) = post(
        port,
        Some(token),
        session.as_deref(),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    assert!(st == 202 || st == 200, "{st} {body}");
    let (st, body, _) = post(
        port,
        Some(token),
        session.as_deref(),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "search_history", "arguments": {"query": WORD}
        }}),
    );
    assert_eq!(st, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let hits: Value = serde_json::from_str(text(&v["result"], 0)).unwrap();
    assert!(
        hits["hits"]
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["handle"].is_string() && h["conversation"] == CONVERSATION),
        "{hits}"
    );
}

fn stop(mut child: Child) -> (std::process::ExitStatus, String) {
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let start = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(40) {
            let _ = child.kill();
            panic!("the server did not stop within 40 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (st, err)
}

#[test]
fn http_with_listen_needs_the_token_it_was_given() {
    let (_dir, db) = archive();
    // Beyond loopback without a token: refused before listening.
    let o = bin()
        .args(["mcp", "--listen", "0.0.0.0:0", "--archive"])
        .arg(&db)
        .env_remove("CTXPRESS_MCP_TOKEN")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--token"), "{err}");

    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["mcp", "--archive"])
        .arg(&db)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("CTXPRESS_MCP_TOKEN", "tok-mcp-2")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(port, &mut child);
    http_checks(port, "tok-mcp-2");
    let (st, err) = stop(child);
    assert!(st.success(), "{st:?} {err}");
    assert!(
        err.contains(&format!("http://127.0.0.1:{port}/mcp")),
        "{err}"
    );
    assert!(!err.contains("tok-mcp-2"), "{err}");
}

#[test]
fn serve_mounts_mcp_behind_the_admin_token() {
    let (dir, db) = archive();
    // --mcp needs the admin token.
    let o = bin()
        .args(["serve", "--mcp", "--budget", "8000", "--upstream"])
        .arg("http://127.0.0.1:9/v1")
        .arg("--archive")
        .arg(&db)
        .env_remove("CTXPRESS_ADMIN_TOKEN")
        .env_remove("CTXPRESS_SEARCH_TOKEN")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--mcp") && err.contains("admin token"),
        "{err}"
    );

    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["serve", "--mcp", "--budget", "8000", "--quiet"])
        .args(["--upstream", "http://127.0.0.1:9/v1"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--archive")
        .arg(&db)
        .args(["--admin-token", "tok-serve-mcp"])
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(port, &mut child);
    http_checks(port, "tok-serve-mcp");
    let (st, err) = stop(child);
    assert!(st.success(), "{st:?} {err}");
}

/// An agent client installed by `scripts/real-clients.sh install` (or
/// named by `$ENV`); `None` with a SKIP line when missing (a failure when
/// CI is set; `CTXPRESS_SKIP_CLIENTS=1` skips on purpose).
fn real_client(name: &str, env: &str) -> Option<PathBuf> {
    if std::env::var_os("CTXPRESS_SKIP_CLIENTS").is_some_and(|v| v == "1") {
        eprintln!("SKIP: {name}: CTXPRESS_SKIP_CLIENTS=1");
        return None;
    }
    let bin = match std::env::var_os(env) {
        Some(p) => PathBuf::from(p),
        None => match std::env::var_os("CTXPRESS_CACHE") {
            Some(c) => PathBuf::from(c),
            None => {
                PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/ctxpress")
            }
        }
        .join("clients/bin")
        .join(name),
    };
    if bin.is_file() {
        return Some(bin);
    }
    let what = format!(
        "{name} not installed at {} (scripts/real-clients.sh install, or ${env})",
        bin.display()
    );
    assert!(
        std::env::var_os("CI").is_none(),
        "{what} (CI is set: a prerequisite may not be missing there)"
    );
    eprintln!("SKIP: {what}");
    None
}

/// Run `sh -c LINE` in `work` as a user whose HOME is `home`, with `ctxpress`
/// (this build) and the clients on PATH, no traffic beyond 127.0.0.1, at
/// most 90 s: its exit status and output (stdout and stderr).
fn as_user(
    home: &Path,
    work: &Path,
    clients: &[&Path],
    line: &str,
    envs: &[(&str, &str)],
) -> (bool, String) {
    let mut path: Vec<PathBuf> = vec![home.join("bin")];
    path.extend(
        clients
            .iter()
            .filter_map(|c| c.parent())
            .map(Path::to_path_buf),
    );
    path.extend(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    ));
    let mut cmd = Command::new("sh");
    cmd.args(["-c", line])
        .current_dir(work)
        .env_clear()
        .env("PATH", std::env::join_paths(path).unwrap())
        .env("HOME", home)
        .env("TMPDIR", home.join("tmp"))
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb")
        .env("NO_COLOR", "1")
        .env("ANTHROPIC_API_KEY", "sk-ant-ctxpress-test-key")
        .envs(envs.iter().copied());
    for k in [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
        "ALL_PROXY",
    ] {
        cmd.env(k, "http://127.0.0.1:9");
    }
    for k in ["NO_PROXY", "no_proxy"] {
        cmd.env(k, "127.0.0.1,localhost");
    }
    for k in [
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
        "DISABLE_ERROR_REPORTING",
        "IS_SANDBOX",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_SHARE",
        "OPENCODE_DISABLE_CLAUDE_CODE",
    ] {
        cmd.env(k, "1");
    }
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let read_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let read_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let st = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = Command::new("kill")
                .args(["-KILL", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!("`{line}` ran over 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = read_out.join().unwrap() + &read_err.join().unwrap();
    (st.success(), text)
}

/// The README's client lines, run as written by the pinned Claude Code and
/// opencode (`scripts/real-clients.sh`): `claude mcp add` (stdio, and the
/// HTTP form against `serve --mcp`) then `claude mcp list`, which connects
/// to each server; the README's opencode.json then `opencode mcp list`.
/// Each must report the ctxpress server connected; a wrong token is not.
#[test]
fn the_readme_lines_connect_real_clients() {
    let claude = real_client("claude", "CTXPRESS_CLAUDE_BIN");
    let opencode = real_client("opencode", "CTXPRESS_OPENCODE_BIN");
    if claude.is_none() && opencode.is_none() {
        return;
    }
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
            .unwrap();
    let (_dir, db) = archive();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    for d in ["bin", "tmp", "work"] {
        std::fs::create_dir(home.join(d)).unwrap();
    }
    std::os::unix::fs::symlink(BIN, home.join("bin/ctxpress")).unwrap();
    std::fs::copy(&db, home.join("ctxpress-serve.db")).unwrap();
    let work = home.join("work");
    let port = free_port();
    let token = "tok-readme-clients";
    let mut serve = Command::new(BIN)
        .args(["serve", "--mcp", "--budget", "8000", "--quiet"])
        .args(["--upstream", "http://127.0.0.1:9/v1"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--archive")
        .arg(home.join("ctxpress-serve.db"))
        .args(["--admin-token", token])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(port, &mut serve);
    let at_port = |s: &str| s.replace("127.0.0.1:8787", &format!("127.0.0.1:{port}"));
    let envs = [("CTXPRESS_ADMIN_TOKEN", token)];

    if let Some(claude) = &claude {
        let lines: Vec<&str> = readme
            .lines()
            .filter(|l| l.starts_with("claude mcp add "))
            .collect();
        assert_eq!(lines.len(), 2, "the stdio and HTTP lines: {lines:?}");
        for line in lines {
            let line = at_port(line);
            let (ok, out) = as_user(home, &work, &[claude], &line, &envs);
            assert!(ok, "{line}: {out}");
            let (ok, out) = as_user(home, &work, &[claude], "claude mcp list", &envs);
            let shown = out
                .lines()
                .find(|l| l.starts_with("ctxpress:"))
                .unwrap_or("");
            assert!(
                ok && shown.contains("Connected"),
                "{line}, then claude mcp list: {out}"
            );
            let (ok, out) = as_user(home, &work, &[claude], "claude mcp remove ctxpress", &envs);
            assert!(ok, "{out}");
        }
        // The wrong token is refused (401), and the client says so.
        let line = format!(
            "claude mcp add --transport http ctxpress http://127.0.0.1:{port}/mcp --header 'Authorization: Bearer tok-wrong'"
        );
        let (ok, out) = as_user(home, &work, &[claude], &line, &envs);
        assert!(ok, "{out}");
        let (_, out) = as_user(home, &work, &[claude], "claude mcp list", &envs);
        let shown = out
            .lines()
            .find(|l| l.starts_with("ctxpress:"))
            .unwrap_or("");
        assert!(
            !shown.contains("✔ Connected") && shown.contains("401"),
            "{out}"
        );
    }

    if let Some(opencode) = &opencode {
        let block = readme
            .split("```json\n")
            .skip(1)
            .filter_map(|b| b.split("```").next())
            .find(|b| b.contains("opencode.ai/config.json"))
            .expect("the README's opencode.json");
        let mut cfg: Value = serde_json::from_str(&at_port(block)).unwrap();
        // As a user writes it: their own home for /home/me, both entries on.
        let servers = cfg["mcp"].as_object_mut().unwrap();
        assert_eq!(servers.len(), 2, "{block}");
        for (_, s) in servers.iter_mut() {
            s["enabled"] = json!(true);
        }
        let text = cfg.to_string().replace("/home/me", home.to_str().unwrap());
        std::fs::write(work.join("opencode.json"), text).unwrap();
        let (ok, out) = as_user(home, &work, &[opencode], "opencode mcp list", &envs);
        let connected = out
            .lines()
            .filter(|l| l.contains("ctxpress") && l.contains("connected"))
            .count();
        assert!(ok && connected == 2, "opencode mcp list: {out}");
    }
    let (st, err) = stop(serve);
    assert!(st.success(), "{st:?} {err}");
}
