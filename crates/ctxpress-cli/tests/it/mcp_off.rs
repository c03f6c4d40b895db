//! A build without the cargo feature `mcp`: `ctxpress mcp` and `serve
//! --mcp` exit 2 and name the feature and the command that builds it (the
//! suite `mcp::` tests the server itself, with the feature).

use crate::common::bin;

/// The message both commands give.
const SAYS: &str = "--features mcp";

#[test]
fn mcp_says_how_to_get_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args(["mcp", "--archive"])
        .arg(dir.path().join("a.db"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("without the MCP server") && err.contains(SAYS),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn serve_mcp_says_how_to_get_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let out = bin()
        .args([
            "serve",
            "--upstream",
            "http://127.0.0.1:9/v1",
            "--window",
            "8000",
        ])
        .args(["--mcp", "--admin-token", "tok-off", "--archive"])
        .arg(dir.path().join("a.db"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no MCP server") && err.contains(SAYS), "{err}");
    assert!(!dir.path().join("a.db").exists(), "nothing is opened");
}
