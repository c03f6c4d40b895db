//! Real clients through `ctxpress serve` (issue #33 item 7): Claude Code
//! (headless `claude -p`, Anthropic Messages) and opencode (`opencode run`,
//! OpenAI Chat Completions), each driving a tool loop against a scripted
//! stub upstream, all on 127.0.0.1:
//!
//! ```text
//! client --> tap (records what the client sent) --> ctxpress serve --> stub (records, answers)
//! ```
//!
//! The stub speaks the wire formats the clients read (streamed SSE: the
//! Anthropic events with `input_json_delta`, OpenAI `chat.completion.chunk`s
//! with `tool_calls` deltas) and scripts the assistant: a Bash command, a
//! Read of a file in the client's temporary working folder, two more Bash
//! commands, then a final text. The client runs the tools itself.
//!
//! 1. Large window: every request the client sent reaches the stub byte
//!    for byte (body, method, path and query, headers), compared within the
//!    one run, request by request (the tap's record against the stub's).
//! 2. Small window (its trigger set from the token counts of run 1, so that
//!    the fourth request of the loop crosses it): every request the stub
//!    receives, and every request the client sent, is valid for the API
//!    its path names (`ctxpress::validate`: tool calls answered, roles
//!    legal, Claude Code's mid-conversation `role: "system"` messages
//!    included), those under the trigger go as sent, the loop completes, the proxy compacted,
//!    and each request of the loop that did not compact starts with the
//!    previous request's messages as the provider reads them (cache markers
//!    aside, string content as its text block) with the same system and
//!    tools: the session's prefix is kept for the provider's cache.
//!
//! The clients are installed by `scripts/real-clients.sh install` (which
//! `.ci/run` runs) under `~/.cache/ctxpress/clients/bin`, or named by
//! `$CTXPRESS_CLAUDE_BIN` and `$CTXPRESS_OPENCODE_BIN`. A missing client
//! prints a SKIP line, and fails when `CI` is set (`CTXPRESS_SKIP_CLIENTS=1`
//! skips them on purpose). `CTXPRESS_REAL_CLIENTS_DUMP=DIR` writes every
//! request recorded, at the tap and at the stub, into DIR. Each client runs
//! with a fresh HOME in a temporary folder, its traffic beyond 127.0.0.1
//! sent to a closed port (HTTPS_PROXY), and is killed (its process group)
//! after [`CLIENT_TIMEOUT`].
#![allow(missing_docs)]

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Response, StatusCode, Uri};
use ctxpress::core::Format;
use ctxpress::{Conversation, PipelineConfig, Session, validate};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;

/// Longest a client may run; it is killed after.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);

/// The assistant's last words, which the client prints.
const FINAL: &str = "All done: four tool calls ran.";

const PROMPT: &str = "Run the four steps of the ctxpress test, then say you are done.";

/// The agent preset, whose `[window]` the tests add.
const AGENT: &str = include_str!("../../../ctxpress/presets/agent.toml");

/// A missing prerequisite: a visible SKIP, or a failure on CI.
fn skip(what: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{what} (CI is set: a prerequisite may not be missing there)");
    }
    eprintln!("SKIP: {what}");
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Anthropic,
    OpenAi,
}

#[derive(Debug)]
struct Client {
    name: &'static str,
    api: Api,
    bin: PathBuf,
}

/// The client's binary: `$ENV`, else the cache's `clients/bin/NAME`.
fn find(name: &'static str, env: &str, api: Api) -> Option<Client> {
    if std::env::var_os("CTXPRESS_SKIP_CLIENTS").is_some_and(|v| v == "1") {
        eprintln!("SKIP: {name}: CTXPRESS_SKIP_CLIENTS=1");
        return None;
    }
    let bin = match std::env::var_os(env) {
        Some(p) => PathBuf::from(p),
        None => {
            let cache = match std::env::var_os("CTXPRESS_CACHE") {
                Some(c) => PathBuf::from(c),
                None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                    .join(".cache/ctxpress"),
            };
            cache.join("clients/bin").join(name)
        }
    };
    if bin.is_file() {
        Some(Client { name, api, bin })
    } else {
        skip(&format!(
            "{name} not installed at {} (scripts/real-clients.sh install, or ${env})",
            bin.display()
        ));
        None
    }
}

/// One request as received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// Path and query.
    path: String,
    headers: Vec<(String, String)>,
    body: Bytes,
}

impl Seen {
    fn of(method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Self {
        Seen {
            method: method.to_string(),
            path: uri
                .path_and_query()
                .map_or_else(|| uri.path().to_string(), |p| p.to_string()),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), String::from_utf8_lossy(v.as_bytes()).into()))
                .collect(),
            body: body.clone(),
        }
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// A request of the tool loop (not a title or other side request): it
    /// offers the shell tool.
    fn is_loop(&self) -> bool {
        self.json()["tools"].as_array().is_some_and(|t| {
            t.iter().any(|t| {
                let name = t["name"].as_str().or(t["function"]["name"].as_str());
                matches!(name, Some("Bash" | "bash"))
            })
        })
    }

    fn is_conversation(&self) -> bool {
        self.method == "POST"
            && matches!(
                self.path.split('?').next(),
                Some("/v1/messages" | "/v1/chat/completions")
            )
    }
}

/// Headers that belong to one connection (or that a forwarder sets itself).
fn per_connection(name: &str) -> bool {
    matches!(
        name,
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

// ---------------------------------------------------------------------------
// The stub upstream

struct Stub {
    api: Api,
    /// The file step 1 reads.
    notes: PathBuf,
    seen: Mutex<Vec<Seen>>,
    /// Steps answered, in order.
    steps: Mutex<Vec<usize>>,
}

/// Step `k` of the loop: the tool call, or `None` for the final answer.
fn step(api: Api, k: usize, notes: &Path) -> Option<(&'static str, Value)> {
    let bash = |command: &str| json!({"command": command, "description": "Print some lines"});
    let shell = match api {
        Api::Anthropic => "Bash",
        Api::OpenAi => "bash",
    };
    match k {
        0 => Some((shell, bash("seq 1 1500"))),
        1 => Some(match api {
            Api::Anthropic => ("Read", json!({"file_path": notes})),
            Api::OpenAi => ("read", json!({"filePath": notes})),
        }),
        2 => Some((shell, bash("seq 1501 3000"))),
        3 => Some((shell, bash("echo hi"))),
        _ => None,
    }
}

/// The id of step `k`'s tool call.
fn call_id(api: Api, k: usize) -> String {
    match api {
        Api::Anthropic => format!("toolu_ctxp_{k:02}"),
        Api::OpenAi => format!("call_ctxp_{k:02}"),
    }
}

/// The step a loop request asks for: one past the step whose tool result
/// ends it (0 when none does). Read from the newest message, which no
/// compaction touches.
fn next_step(api: Api, req: &Value) -> usize {
    let last = req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or(Value::Null);
    let ids: Vec<&str> = match api {
        Api::Anthropic => last["content"]
            .as_array()
            .map(|b| {
                b.iter()
                    .filter(|b| b["type"] == "tool_result")
                    .filter_map(|b| b["tool_use_id"].as_str())
                    .collect()
            })
            .unwrap_or_default(),
        Api::OpenAi => last["tool_call_id"].as_str().into_iter().collect(),
    };
    ids.iter()
        .filter_map(|id| id.rsplit('_').next()?.parse::<usize>().ok())
        .max()
        .map_or(0, |k| k + 1)
}

fn sse(event: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

fn chunk(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// `s` cut in two at a character boundary near its middle.
fn halves(s: &str) -> (&str, &str) {
    let mut mid = s.len() / 2;
    while !s.is_char_boundary(mid) {
        mid -= 1;
    }
    s.split_at(mid)
}

/// The assistant's answer: text, then the step's tool call if any.
fn anthropic_answer(
    n: usize,
    model: &str,
    stream: bool,
    text: &str,
    call: Option<(String, &str, Value)>,
) -> (Vec<Bytes>, &'static str) {
    let stop = if call.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    if !stream {
        let mut content = vec![json!({"type": "text", "text": text})];
        if let Some((id, name, input)) = &call {
            content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
        }
        let body = json!({
            "id": format!("msg_stub_{n}"), "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        });
        return (vec![Bytes::from(body.to_string())], "application/json");
    }
    let mut ev = vec![
        sse(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": format!("msg_stub_{n}"), "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 1,
                          "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}),
        ),
        sse("ping", &json!({"type": "ping"})),
        sse(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    let (a, b) = halves(text);
    for part in [a, b] {
        ev.push(sse(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": part}}),
        ));
    }
    ev.push(sse(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    if let Some((id, name, input)) = &call {
        ev.push(sse(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 1,
                    "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        let input = input.to_string();
        let (a, b) = halves(&input);
        for part in [a, b] {
            ev.push(sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": part}}),
            ));
        }
        ev.push(sse(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 1}),
        ));
    }
    ev.push(sse(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                "usage": {"output_tokens": 20}}),
    ));
    ev.push(sse("message_stop", &json!({"type": "message_stop"})));
    (ev, "text/event-stream")
}

fn openai_answer(
    n: usize,
    model: &str,
    stream: bool,
    text: &str,
    call: Option<(String, &str, Value)>,
) -> (Vec<Bytes>, &'static str) {
    let finish = if call.is_some() { "tool_calls" } else { "stop" };
    let usage = json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120});
    if !stream {
        let mut message = json!({"role": "assistant", "content": text});
        if let Some((id, name, input)) = &call {
            message["tool_calls"] = json!([{"id": id, "type": "function",
                "function": {"name": name, "arguments": input.to_string()}}]);
        }
        let body = json!({
            "id": format!("chatcmpl-stub-{n}"), "object": "chat.completion", "created": 1_700_000_000,
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        });
        return (vec![Bytes::from(body.to_string())], "application/json");
    }
    let base = |choices: Value| {
        json!({"id": format!("chatcmpl-stub-{n}"), "object": "chat.completion.chunk",
               "created": 1_700_000_000, "model": model, "choices": choices})
    };
    let delta = |d: Value| base(json!([{"index": 0, "delta": d, "finish_reason": null}]));
    let mut ev = vec![chunk(&delta(json!({"role": "assistant", "content": ""})))];
    let (a, b) = halves(text);
    for part in [a, b] {
        ev.push(chunk(&delta(json!({"content": part}))));
    }
    if let Some((id, name, input)) = &call {
        ev.push(chunk(&delta(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}}]}),
        )));
        let input = input.to_string();
        let (a, b) = halves(&input);
        for part in [a, b] {
            ev.push(chunk(&delta(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
            )));
        }
    }
    ev.push(chunk(&base(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
    )));
    let mut last = base(json!([]));
    last["usage"] = usage;
    ev.push(chunk(&last));
    ev.push(Bytes::from_static(b"data: [DONE]\n\n"));
    (ev, "text/event-stream")
}

async fn stub_handle(
    stub: Arc<Stub>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let seen = Seen::of(&method, &uri, &headers, &body);
    let n = {
        let mut g = stub.seen.lock().unwrap();
        g.push(seen.clone());
        g.len()
    };
    let json_response = |status: StatusCode, v: Value| {
        Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .header("request-id", format!("req_stub_{n}"))
            .body(Body::from(v.to_string()))
            .unwrap()
    };
    let path = uri.path();
    match (method.as_str(), path) {
        ("POST", "/v1/messages/count_tokens") => {
            json_response(StatusCode::OK, json!({"input_tokens": body.len() / 4}))
        }
        ("POST", "/v1/messages" | "/v1/chat/completions") => {
            let req = seen.json();
            let model = req["model"].as_str().unwrap_or("stub").to_string();
            let stream = req["stream"] == json!(true);
            let (text, call) = if seen.is_loop() {
                let mut steps = stub.steps.lock().unwrap();
                // A client that keeps asking (it lost its place) gets the end.
                let k = if steps.len() >= 12 {
                    4
                } else {
                    next_step(stub.api, &req)
                };
                steps.push(k);
                match step(stub.api, k, &stub.notes) {
                    Some((name, input)) => (
                        format!("Step {k}: running {name}."),
                        Some((call_id(stub.api, k), name, input)),
                    ),
                    None => (FINAL.to_string(), None),
                }
            } else {
                ("Ctxpress test run".to_string(), None)
            };
            let (events, content_type) = match stub.api {
                Api::Anthropic => anthropic_answer(n, &model, stream, &text, call),
                Api::OpenAi => openai_answer(n, &model, stream, &text, call),
            };
            // One chunk per event, as a server sends them.
            let body = Body::from_stream(futures_util::stream::iter(
                events
                    .into_iter()
                    .map(Ok::<Bytes, std::convert::Infallible>),
            ));
            Response::builder()
                .header("content-type", content_type)
                .header("request-id", format!("req_stub_{n}"))
                .body(body)
                .unwrap()
        }
        // Anything else: recorded, and answered with a plain not-found.
        _ => json_response(
            StatusCode::NOT_FOUND,
            json!({"type": "error", "error": {"type": "not_found_error", "message": "stub: no such path"}}),
        ),
    }
}

// ---------------------------------------------------------------------------
// The tap: records what the client sends, forwards it to the proxy.

struct Tap {
    proxy: String,
    client: reqwest::Client,
    seen: Mutex<Vec<Seen>>,
}

async fn tap_handle(
    tap: Arc<Tap>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response<Body> {
    let seen = Seen::of(&method, &uri, &headers, &body);
    let url = format!("{}{}", tap.proxy, seen.path);
    tap.seen.lock().unwrap().push(seen);
    let mut req = tap.client.request(method, url);
    for (k, v) in &headers {
        if !per_connection(k.as_str()) {
            req = req.header(k, v);
        }
    }
    let r = match req.body(body).send().await {
        Ok(r) => r,
        Err(e) => {
            return Response::builder()
                .status(StatusCode::BAD_GATEWAY)
                .body(Body::from(format!("tap: {e}")))
                .unwrap();
        }
    };
    let mut out = Response::builder().status(r.status());
    for (k, v) in r.headers() {
        if !per_connection(k.as_str()) {
            out = out.header(k, v);
        }
    }
    let b = r.bytes().await.unwrap_or_default();
    out.body(Body::from(b)).unwrap()
}

/// Serve `app` on 127.0.0.1 (a free port); its URL and task.
fn listen(rt: &Runtime, app: Router) -> (String, tokio::task::JoinHandle<()>) {
    let l = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = l.local_addr().unwrap();
    let task = rt.spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (format!("http://{addr}"), task)
}

// ---------------------------------------------------------------------------
// `ctxpress serve`

struct Serve {
    child: Child,
    url: String,
    log: Arc<Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Serve {
    fn start(upstream: &str, args: &[String]) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ctxpress"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--no-archive",
                "--upstream",
                upstream,
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("ctxpress serve: listening on ") {
                    let url = rest.split(',').next().unwrap_or("").to_string();
                    let _ = tx.send(url);
                }
                lines.lock().unwrap().push(line);
            }
        });
        let mut serve = Serve {
            child,
            url: String::new(),
            log,
            reader: Some(reader),
        };
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(url) => serve.url = url,
            Err(_) => panic!(
                "ctxpress serve did not start: {:?}",
                serve.log.lock().unwrap()
            ),
        }
        serve
    }

    /// SIGTERM, then the log once it has ended (killed if it does not end).
    fn stop(mut self) -> Vec<String> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The JSON log lines of the conversation requests, in the order received.
fn log_lines(log: &[String]) -> Vec<Value> {
    log.iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| matches!(v["api"].as_str(), Some("openai" | "anthropic")))
        .collect()
}

// ---------------------------------------------------------------------------
// The client

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
    took: Duration,
}

/// Run `cmd` (in its own process group) to its end, or kill the group after
/// the timeout.
fn run_bounded(mut cmd: Command) -> Output {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if start.elapsed() > CLIENT_TIMEOUT {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    if status.is_none() {
        panic!(
            "the client did not finish within {CLIENT_TIMEOUT:?} (killed)\nstdout: {stdout}\nstderr: {stderr}"
        );
    }
    Output {
        ok: status.is_some_and(|s| s.success()),
        stdout,
        stderr,
        took: start.elapsed(),
    }
}

/// The client's command for a run in `work`, with `home` as its HOME, its
/// API at `base` (the tap).
fn client_command(c: &Client, work: &Path, home: &Path, base: &str) -> Command {
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut cmd = Command::new(&c.bin);
    cmd.current_dir(work)
        .env_clear()
        .env(
            "PATH",
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
        )
        .env("HOME", home)
        .env("TMPDIR", &tmp)
        .env("LANG", "C.UTF-8")
        .env("TERM", "dumb")
        .env("NO_COLOR", "1");
    // Nothing leaves the machine: what does not go to 127.0.0.1 goes to a
    // closed port.
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
    match c.api {
        Api::Anthropic => {
            cmd.args(["-p", PROMPT, "--model", "sonnet", "--output-format", "text"])
                .arg("--dangerously-skip-permissions")
                .env("ANTHROPIC_BASE_URL", base)
                .env("ANTHROPIC_API_KEY", "sk-ant-ctxpress-test-key")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_TELEMETRY", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("DISABLE_ERROR_REPORTING", "1")
                // --dangerously-skip-permissions is refused to root outside
                // a sandbox; this folder is one.
                .env("IS_SANDBOX", "1");
        }
        Api::OpenAi => {
            let config = json!({
                "$schema": "https://opencode.ai/config.json",
                "provider": {"stub": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Stub",
                    "options": {"baseURL": format!("{base}/v1"), "apiKey": "sk-oc-ctxpress-test-key"},
                    "models": {"m1": {"name": "M1", "tool_call": true}},
                }},
                "model": "stub/m1",
                "small_model": "stub/m1",
                "autoupdate": false,
                "share": "disabled",
            });
            std::fs::write(work.join("opencode.json"), config.to_string()).unwrap();
            cmd.args(["run", PROMPT, "--model", "stub/m1"]);
            for k in [
                "OPENCODE_PURE",
                "OPENCODE_DISABLE_DEFAULT_PLUGINS",
                "OPENCODE_DISABLE_MODELS_FETCH",
                "OPENCODE_DISABLE_AUTOUPDATE",
                "OPENCODE_DISABLE_LSP_DOWNLOAD",
                "OPENCODE_DISABLE_SHARE",
                "OPENCODE_DISABLE_CLAUDE_CODE",
            ] {
                cmd.env(k, "1");
            }
        }
    }
    cmd
}

/// What one run through the proxy recorded.
struct Run {
    /// What the client sent (at the tap).
    sent: Vec<Seen>,
    /// What the stub received (from the proxy).
    got: Vec<Seen>,
    steps: Vec<usize>,
    log: Vec<String>,
    metrics: String,
    out: Output,
}

/// The client through tap, proxy (`ctxpress serve SERVE_ARGS`) and stub.
fn run_once(rt: &Runtime, c: &Client, serve_args: &[String]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let notes = work.join("notes.txt");
    let text: String = (1..=300)
        .map(|i| format!("note {i}: the cache key is built from the request path, not its id\n"))
        .collect();
    std::fs::write(&notes, text).unwrap();

    let stub = Arc::new(Stub {
        api: c.api,
        notes,
        seen: Mutex::default(),
        steps: Mutex::default(),
    });
    let s = stub.clone();
    let (stub_url, stub_task) = listen(
        rt,
        Router::new().fallback(move |m: Method, u: Uri, h: HeaderMap, b: Bytes| {
            stub_handle(s.clone(), m, u, h, b)
        }),
    );
    let serve = Serve::start(&format!("{stub_url}/v1"), serve_args);
    let tap = Arc::new(Tap {
        proxy: serve.url.clone(),
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap(),
        seen: Mutex::default(),
    });
    let t = tap.clone();
    let (tap_url, tap_task) = listen(
        rt,
        Router::new().fallback(move |m: Method, u: Uri, h: HeaderMap, b: Bytes| {
            tap_handle(t.clone(), m, u, h, b)
        }),
    );

    let out = run_bounded(client_command(c, &work, &home, &tap_url));

    let metrics = rt
        .block_on(async {
            reqwest::Client::new()
                .get(format!("{}/metrics", serve.url))
                .timeout(Duration::from_secs(30))
                .send()
                .await?
                .text()
                .await
        })
        .unwrap_or_default();
    let log = serve.stop();
    tap_task.abort();
    stub_task.abort();
    let sent = std::mem::take(&mut *tap.seen.lock().unwrap());
    let got = std::mem::take(&mut *stub.seen.lock().unwrap());
    let steps = std::mem::take(&mut *stub.steps.lock().unwrap());
    Run {
        sent,
        got,
        steps,
        log,
        metrics,
        out,
    }
}

/// The run completed the loop: the client ended well, printed the final
/// answer, and the stub answered every step in order.
fn assert_completed(c: &Client, r: &Run) {
    assert!(
        r.out.ok && r.out.stdout.contains(FINAL),
        "{} did not complete the loop (steps {:?})\nstdout: {}\nstderr: {}",
        c.name,
        r.steps,
        r.out.stdout,
        r.out.stderr
    );
    assert_eq!(r.steps, [0, 1, 2, 3, 4], "{}: the steps answered", c.name);
}

/// A metric's value.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// Print what the client sent: paths, headers, body fields.
fn describe(c: &Client, r: &Run) {
    eprintln!(
        "{}: {} requests in {:.1} s",
        c.name,
        r.sent.len(),
        r.out.took.as_secs_f64()
    );
    for s in &r.sent {
        let v = s.json();
        let fields: Vec<&str> = v
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        eprintln!(
            "  {} {} ({} bytes{}; fields {fields:?})",
            s.method,
            s.path,
            s.body.len(),
            if s.is_loop() { ", tool loop" } else { "" }
        );
    }
    if let Some(s) = r.sent.first() {
        let names: Vec<&str> = s.headers.iter().map(|(k, _)| k.as_str()).collect();
        eprintln!("  headers: {names:?}");
    }
}

/// With `$CTXPRESS_REAL_CLIENTS_DUMP` set, write what run `phase` of `c`
/// sent and what the stub got there, one file per request (the request
/// line and headers, a blank line, the body), and the proxy's log.
fn dump(c: &Client, phase: &str, r: &Run) {
    let Some(root) = std::env::var_os("CTXPRESS_REAL_CLIENTS_DUMP") else {
        return;
    };
    let dir = Path::new(&root).join(format!("{}-{phase}", c.name));
    std::fs::create_dir_all(&dir).unwrap();
    for (what, list) in [("sent", &r.sent), ("got", &r.got)] {
        for (i, s) in list.iter().enumerate() {
            let mut text = format!("{} {}\n", s.method, s.path).into_bytes();
            for (k, v) in &s.headers {
                text.extend_from_slice(format!("{k}: {v}\n").as_bytes());
            }
            text.push(b'\n');
            text.extend_from_slice(&s.body);
            std::fs::write(dir.join(format!("{what}-{i:02}.http")), text).unwrap();
        }
    }
    std::fs::write(dir.join("serve.log"), r.log.join("\n")).unwrap();
    std::fs::write(
        dir.join("client.out"),
        format!("{}\n--- stderr\n{}", r.out.stdout, r.out.stderr),
    )
    .unwrap();
}

/// Check 1: every request the client sent reached the stub as sent.
fn assert_byte_for_byte(c: &Client, r: &Run) {
    let mut got: Vec<&Seen> = r.got.iter().collect();
    let api: Vec<&Seen> = r
        .sent
        .iter()
        .filter(|s| s.path == "/v1" || s.path.starts_with("/v1/") || s.path.starts_with("/v1?"))
        .collect();
    let outside: Vec<&str> = r
        .sent
        .iter()
        .filter(|s| !api.iter().any(|a| std::ptr::eq(*a, *s)))
        .map(|s| s.path.as_str())
        .collect();
    assert!(
        outside.is_empty(),
        "{}: requests outside /v1, which the proxy does not forward: {outside:?}",
        c.name
    );
    // Matched as a set: requests sent at once (a title and a loop turn) may
    // reach the stub in either order.
    for (i, s) in api.iter().enumerate() {
        let Some(j) = got
            .iter()
            .position(|g| g.method == s.method && g.path == s.path && g.body == s.body)
        else {
            let near = got.iter().find(|g| g.path == s.path);
            let at = near.map(|g| {
                s.body
                    .iter()
                    .zip(g.body.iter())
                    .position(|(a, b)| a != b)
                    .unwrap_or(s.body.len().min(g.body.len()))
            });
            panic!(
                "{}: request {i} ({} {}, {} bytes) did not reach the stub as sent; \
                 the stub got {:?}; first difference with the same path at byte {at:?}",
                c.name,
                s.method,
                s.path,
                s.body.len(),
                r.got
                    .iter()
                    .map(|g| (&g.path, g.body.len()))
                    .collect::<Vec<_>>()
            );
        };
        let g = got.remove(j);
        for (k, v) in &s.headers {
            if per_connection(k) {
                continue;
            }
            let arrived: Vec<&String> = g
                .headers
                .iter()
                .filter(|(gk, _)| gk == k)
                .map(|(_, gv)| gv)
                .collect();
            assert!(
                arrived.contains(&v),
                "{}: request {i} header {k}: sent {v:?}, arrived {arrived:?}",
                c.name
            );
        }
    }
    assert!(
        got.is_empty(),
        "{}: the stub got requests the client did not send: {:?}",
        c.name,
        got.iter().map(|g| &g.path).collect::<Vec<_>>()
    );
}

/// Message `m` as the provider reads it: without its cache markers (at any
/// depth), string content read as the one text block it stands for (Claude
/// Code sends a message as blocks while its newest, to mark it, and as a
/// string after).
fn as_read(m: &Value) -> Value {
    let mut m = unmarked(m);
    if let Some(s) = m.get("content").and_then(Value::as_str) {
        m["content"] = json!([{"type": "text", "text": s}]);
    }
    m
}

fn unmarked(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| *k != "cache_control")
                .map(|(k, v)| (k.clone(), unmarked(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(unmarked).collect()),
        v => v.clone(),
    }
}

/// The window table of the small-window run.
fn config(size: usize, trigger: f64, target: f64) -> String {
    format!(
        "{AGENT}\n[window]\nsize = {size}\ntrigger = {trigger}\ntarget = {target}\nprotected_tail = 2\n"
    )
}

/// Tokens of each tool-loop request of `r` as the proxy counts them.
fn loop_tokens(r: &Run) -> Vec<usize> {
    let cfg = PipelineConfig::parse(&config(100_000_000, 0.7, 0.4)).unwrap();
    let mut session = Session::new(&cfg).unwrap();
    r.sent
        .iter()
        .filter(|s| s.is_loop())
        .map(|s| {
            let conv = Conversation::parse(std::str::from_utf8(&s.body).unwrap()).unwrap();
            session.prepare(&conv).unwrap().1.tokens_given
        })
        .collect()
}

/// Check 2: with a small window, valid requests, compaction, the prefix
/// kept between compactions.
fn assert_small_window(c: &Client, r: &Run) {
    // Each upstream request against the client's own: the loop's requests
    // pair up in order (the client sends them one at a time), and so do the
    // others. Both are valid for the API their path names: the client's
    // own (Claude Code's mid-conversation `role: "system"` messages are
    // Anthropic's), and so what the proxy sends.
    let conversations = |list: &[Seen], tool_loop: bool| -> Vec<Seen> {
        list.iter()
            .filter(|s| s.is_conversation() && s.is_loop() == tool_loop)
            .cloned()
            .collect()
    };
    for tool_loop in [true, false] {
        let sent = conversations(&r.sent, tool_loop);
        let got = conversations(&r.got, tool_loop);
        assert_eq!(sent.len(), got.len(), "{}: requests forwarded", c.name);
        for (i, (s, g)) in sent.iter().zip(&got).enumerate() {
            let violations = |x: &Seen| -> Vec<String> {
                let text = std::str::from_utf8(&x.body).unwrap();
                let format = match x.path.split('?').next() {
                    Some("/v1/messages") => Format::Anthropic,
                    _ => Format::OpenAi,
                };
                let conv = Conversation::parse_as(text, format).unwrap_or_else(|e| {
                    panic!("{}: request {i} ({}) does not parse: {e}", c.name, x.path)
                });
                validate(&conv)
                    .iter()
                    .map(|v| format!("{:?}: {}", v.kind, v.detail))
                    .collect()
            };
            for (whose, x) in [("the client's own", s), ("upstream", g)] {
                let v = violations(x);
                assert!(
                    v.is_empty(),
                    "{}: {whose} request {i} (tool loop: {tool_loop}) is not valid: {v:?}",
                    c.name
                );
            }
        }
    }
    // The loop's requests, and the proxy's log lines of its session, in order
    // (the client sends them one at a time).
    let loop_got: Vec<Value> = r
        .got
        .iter()
        .filter(|g| g.is_loop())
        .map(Seen::json)
        .collect();
    let lines = log_lines(&r.log);
    let mut by_session: HashMap<String, Vec<&Value>> = HashMap::new();
    for l in &lines {
        by_session
            .entry(l["session"].as_str().unwrap_or("").to_string())
            .or_default()
            .push(l);
    }
    let main = by_session
        .values()
        .max_by_key(|v| v.len())
        .expect("log lines of the conversation requests");
    assert_eq!(
        main.len(),
        loop_got.len(),
        "{}: one session holds the tool loop: {lines:?}",
        c.name
    );
    let compacted: Vec<bool> = main.iter().map(|l| l["compacted"] == json!(true)).collect();
    for l in main {
        eprintln!(
            "  loop request: tokens_given {} tokens_sent {} compacted {} fits {}",
            l["tokens_given"], l["tokens_sent"], l["compacted"], l["fits"]
        );
    }
    assert!(
        compacted.iter().any(|&x| x),
        "{}: the small window never compacted: {main:?}",
        c.name
    );
    let first = compacted.iter().position(|&x| x).unwrap();
    assert!(
        compacted[first + 1..].iter().any(|&x| !x),
        "{}: no request after the compaction kept its prefix: {compacted:?}",
        c.name
    );
    // Under the trigger, before the first compaction, the history goes as sent.
    let loop_sent: Vec<&Seen> = r.sent.iter().filter(|s| s.is_loop()).collect();
    let loop_bodies: Vec<&Seen> = r.got.iter().filter(|g| g.is_loop()).collect();
    for k in 0..first {
        assert!(
            loop_sent[k].body == loop_bodies[k].body,
            "{}: loop request {k}, under the trigger, did not go as sent",
            c.name
        );
    }
    for k in 1..loop_got.len() {
        let (a, b) = (&loop_got[k - 1], &loop_got[k]);
        for field in ["system", "tools", "model"] {
            assert_eq!(
                a.get(field),
                b.get(field),
                "{}: loop request {k}: `{field}` changed",
                c.name
            );
        }
        let ma = a["messages"].as_array().unwrap();
        let mb = b["messages"].as_array().unwrap();
        let kept = mb.len() > ma.len() && ma.iter().zip(mb).all(|(x, y)| as_read(x) == as_read(y));
        if compacted[k] {
            assert!(
                !kept,
                "{}: loop request {k} compacted but kept its prefix",
                c.name
            );
        } else {
            assert!(
                kept,
                "{}: loop request {k} did not compact, yet does not start with request {}'s {} messages",
                c.name,
                k - 1,
                ma.len()
            );
        }
    }
    assert!(
        metric(&r.metrics, "ctxpress_compactions_total") >= 1.0,
        "{}",
        r.metrics
    );
    let last = main.last().unwrap();
    assert!(
        last["tokens_sent"].as_u64() < last["tokens_given"].as_u64(),
        "{}: the last request was not smaller than the history: {last}",
        c.name
    );
}

fn through_the_proxy(c: Client) {
    let start = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    // 1. A window no request comes near: everything passes as sent.
    let big = run_once(&rt, &c, &["--window".into(), "10000000".into()]);
    describe(&c, &big);
    dump(&c, "large", &big);
    assert_completed(&c, &big);
    assert_byte_for_byte(&c, &big);

    // 2. A window whose trigger lies between the third and the fourth loop
    // request of run 1, its target between the second and the third.
    let g = loop_tokens(&big);
    eprintln!("{}: tool-loop requests of run 1, in tokens: {g:?}", c.name);
    assert_eq!(g.len(), 5, "{}", c.name);
    assert!(g.windows(2).all(|w| w[0] < w[1]), "{}: {g:?}", c.name);
    let trigger = (g[2] + g[3]) / 2;
    let target = (g[1] + g[2]) / 2;
    let size = 2 * trigger;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("small.toml");
    std::fs::write(&cfg, config(size, 0.5, target as f64 / size as f64)).unwrap();
    eprintln!(
        "{}: small window {size}: trigger {trigger}, target {target}",
        c.name
    );
    let small = run_once(&rt, &c, &["--config".into(), cfg.display().to_string()]);
    describe(&c, &small);
    dump(&c, "small", &small);
    assert_completed(&c, &small);
    assert_small_window(&c, &small);
    eprintln!(
        "{}: both runs in {:.1} s",
        c.name,
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn claude_code_through_the_proxy() {
    if let Some(c) = find("claude", "CTXPRESS_CLAUDE_BIN", Api::Anthropic) {
        through_the_proxy(c);
    }
}

#[test]
fn opencode_through_the_proxy() {
    if let Some(c) = find("opencode", "CTXPRESS_OPENCODE_BIN", Api::OpenAi) {
        through_the_proxy(c);
    }
}
