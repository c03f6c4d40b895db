//! `ctxpress serve` as a command: its configuration errors, and a real run
//! on 127.0.0.1 (health, an unreachable upstream answered with a clear 502,
//! the admin token on /metrics and search, a foreign Host refused and an
//! allowed one answered, a log line without credentials, SIGTERM ending it
//! with exit 0).
#![allow(missing_docs)]

use crate::common::{bin, free_port};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn configuration_errors_are_plain() {
    let out = bin()
        .args(["serve", "--upstream", "http://127.0.0.1:9/v1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--window TOKENS"));
    let out = bin().args(["serve", "--window", "1000"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--upstream"));
    // The admin token's former flag name is still read.
    let out = bin()
        .args(["serve", "--window", "1000", "--search-token", "t"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--upstream") && !err.contains("unexpected"),
        "{err}"
    );
    let out = bin()
        .args([
            "serve",
            "--window",
            "1000",
            "--upstream",
            "http://127.0.0.1:9/v1",
        ])
        .args(["--allow-host", "evil.example/x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("allowed host `evil.example/x`"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("serve.toml");
    std::fs::write(&cfg, "version = 1\n[serve]\nupstrem = \"http://x/v1\"\n").unwrap();
    let out = bin()
        .args(["serve", "--window", "1000", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean `upstream`"), "{err}");
    let out = bin()
        .args(["serve", "--window", "1000", "--upstream", "ftp://x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

fn http(port: u16, request: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serves_until_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let dead = free_port();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("ctxpress"))
        .args(["serve", "--window", "8000", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--upstream")
        .arg(format!(
            "http://127.0.0.1:{dead}/v1?key=sk-upstream-query-secret"
        ))
        .arg("--archive")
        .arg(dir.path().join("a.db"))
        .args(["--admin-token", "tok-serve-1", "--session-memory-mb", "16"])
        .args(["--allow-host", "proxy.internal"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "serve did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let health = http(
        port,
        "GET /ctxpress/health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    let host = format!("127.0.0.1:{port}");
    assert!(
        health.starts_with("HTTP/1.1 200") && health.ends_with("ok\n"),
        "{health}"
    );
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let r = http(
        port,
        &format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer sk-secret-123\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(r.starts_with("HTTP/1.1 502"), "{r}");
    assert!(r.contains("unreachable"), "{r}");
    assert!(!r.contains("sk-upstream-query-secret"), "{r}");
    let search = |auth: &str| {
        http(
            port,
            &format!(
                "GET /ctxpress/search?q=hi&conversation=x0 HTTP/1.1\r\nhost: {host}\r\n{auth}connection: close\r\n\r\n"
            ),
        )
    };
    let r = search("");
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    let r = search("authorization: Bearer tok-serve-1\r\n");
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    // /metrics needs the admin token too; a foreign Host is refused, an
    // allowed one answered.
    let metrics = |host: &str, auth: &str| {
        http(
            port,
            &format!("GET /metrics HTTP/1.1\r\nhost: {host}\r\n{auth}connection: close\r\n\r\n"),
        )
    };
    let r = metrics(&host, "");
    assert!(r.starts_with("HTTP/1.1 401"), "{r}");
    let auth = "authorization: Bearer tok-serve-1\r\n";
    let r = metrics(&host, auth);
    assert!(
        r.starts_with("HTTP/1.1 200") && r.contains("ctxpress_requests_total"),
        "{r}"
    );
    let r = metrics("proxy.internal", auth);
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let r = metrics(&format!("evil.example:{port}"), auth);
    assert!(
        r.starts_with("HTTP/1.1 421") && r.contains("evil.example"),
        "{r}"
    );
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("listening on http://127.0.0.1:") && err.contains("stopped"),
        "{err}"
    );
    assert!(err.contains("\"status\":502"), "{err}");
    assert!(
        !err.contains("sk-secret-123") && !err.contains("sk-upstream-query-secret"),
        "credentials are never logged: {err}"
    );
    assert!(err.contains("/v1?***"), "{err}");
    assert!(!err.contains("warning"), "loopback: no warning: {err}");
}
