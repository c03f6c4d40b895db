//! Real agent sessions replayed turn by turn through a `Session`, as a proxy
//! sees them: before each assistant message the client sends the whole
//! history so far. Between two compactions each request extends the
//! previous one byte for byte (the provider's prompt cache stays warm);
//! compactions happen only over the trigger, and rarely; every request is valid for the API, under the
//! trigger, and expands back to the history it stands for.
//!
//! Also measures what that buys against compressing every turn from scratch
//! with the same window: the share of request tokens a provider could serve
//! from its cache (the start each request shares with the one before).
//!
//! The default run replays every turn of a few conversations;
//! `CTXPRESS_REPLAY_ALL=1` replays every conversation of the files (meant
//! for `--release`; the figures in docs/benchmarks.md come from that).

use ctxpress::core::validate::introduces_violations;
use ctxpress::{
    Compressor, Conversation, MemoryArchive, PipelineConfig, Session, expand, validate,
};
use ctxpress_tests::corpus::{self, Line};
use std::sync::Arc;

fn all() -> bool {
    std::env::var_os("CTXPRESS_REPLAY_ALL").is_some_and(|v| v == "1")
}

fn config(window: usize) -> PipelineConfig {
    let mut cfg = ctxpress::preset("agent").unwrap();
    cfg.window.size = Some(window);
    cfg
}

fn texts(c: &Conversation) -> Vec<String> {
    c.messages.iter().map(|m| c.message_json(m)).collect()
}

/// Figures of one replay.
#[derive(Default, Debug)]
struct Figures {
    turns: usize,
    compactions: usize,
    request_tokens: usize,
    cached_session: usize,
    cached_stateless: usize,
    given_tokens: usize,
}

/// Tokens of the first messages `a` shares with `b`.
fn shared_prefix_tokens(a: &Conversation, b: &Conversation) -> usize {
    let counter = ctxpress::core::Heuristic;
    a.messages
        .iter()
        .zip(&b.messages)
        .take_while(|(x, y)| a.message_json(x) == b.message_json(y))
        .map(|(x, _)| ctxpress::core::tokens::count_message(&counter, x))
        .sum()
}

fn replay(line: &Line, window: usize, stateless: bool) -> Figures {
    let at = &line.at;
    let full = Conversation::parse(&line.text).unwrap_or_else(|e| panic!("{at}: {e}"));
    let archive = Arc::new(MemoryArchive::new());
    let cfg = config(window);
    let mut session = Session::new(&cfg)
        .unwrap()
        .with_archive(Some(archive.clone()));
    let plain = Compressor::from_config(&cfg).unwrap();
    let turns: Vec<usize> = full
        .messages
        .iter()
        .enumerate()
        .filter(|(i, m)| *i > 0 && m.role_str() == "assistant")
        .map(|(i, _)| i)
        .collect();
    let mut f = Figures::default();
    let mut last: Option<(Vec<String>, Conversation)> = None;
    let mut last_plain: Option<Conversation> = None;
    for (n, &k) in turns.iter().enumerate() {
        let mut history = full.clone();
        history.messages.truncate(k);
        let (request, r) = session
            .prepare(&history)
            .unwrap_or_else(|e| panic!("{at}: turn at message {k}: {e}"));
        f.turns += 1;
        f.given_tokens += r.tokens_given;
        f.request_tokens += r.tokens_request;
        f.cached_session += r.tokens_prefix_kept;
        assert!(!r.reset, "{at}: turn at message {k}: reset");
        assert!(
            !introduces_violations(&validate(&history), &validate(&request)),
            "{at}: turn at message {k}: the request breaks pairing or roles"
        );
        let now = texts(&request);
        if std::env::var_os("CTXPRESS_REPLAY_DEBUG").is_some() {
            eprintln!(
                "{at} k={k} given={} req={} compacted={} fits={:?} kept={} changed={}",
                r.tokens_given,
                r.tokens_request,
                r.compacted,
                r.report.as_ref().and_then(|x| x.budget.as_ref()).map(|b| (
                    b.fits,
                    b.target,
                    b.protected_tokens
                )),
                r.tokens_prefix_kept,
                r.tokens_prefix_changed
            );
        }
        if r.compacted {
            f.compactions += 1;
            let before = r.report.as_ref().map_or(0, |x| x.tokens_before);
            assert!(
                before > session.trigger(),
                "{at}: turn at message {k}: compacted at {before} tokens, under the trigger"
            );
        } else if let Some((prev, _)) = &last {
            assert!(
                now.len() >= prev.len() && now[..prev.len()] == prev[..],
                "{at}: turn at message {k}: the request does not extend the previous one"
            );
        } else {
            assert_eq!(
                request.to_json_string(),
                history.to_json_string(),
                "{at}: under the trigger the request is the history"
            );
        }
        if r.fits {
            assert!(
                r.tokens_request <= session.trigger(),
                "{at}: turn at message {k}: {} tokens over the trigger {}",
                r.tokens_request,
                session.trigger()
            );
        }
        if stateless {
            let mut p = history.clone();
            plain.compress(&mut p).unwrap();
            if let Some(prev) = &last_plain {
                f.cached_stateless += shared_prefix_tokens(&p, prev);
            }
            last_plain = Some(p);
        }
        if n + 1 == turns.len() {
            let back = expand(&request, archive.as_ref()).unwrap();
            assert_eq!(
                back.to_json_string(),
                history.to_json_string(),
                "{at}: the last request expands back to its history"
            );
        }
        last = Some((now, request));
    }
    f
}

fn run(file: &str, window: usize, sample: (usize, usize), stateless: bool) -> Figures {
    let path = corpus::file(file);
    let lines = if all() {
        corpus::conversations(&path)
    } else {
        corpus::sample(&path, sample.0, sample.1)
    };
    let mut total = Figures::default();
    for l in &lines {
        let f = replay(l, window, stateless);
        total.turns += f.turns;
        total.compactions += f.compactions;
        total.request_tokens += f.request_tokens;
        total.given_tokens += f.given_tokens;
        total.cached_session += f.cached_session;
        total.cached_stateless += f.cached_stateless;
    }
    let share = |x: usize| x as f64 / total.request_tokens.max(1) as f64;
    println!(
        "{file} (window {window}, {} conversations): {} turns, {} compactions, tokens sent {} of {} given; cached share: session {:.3}{}",
        lines.len(),
        total.turns,
        total.compactions,
        total.request_tokens,
        total.given_tokens,
        share(total.cached_session),
        if stateless {
            format!(
                ", recompressing every turn {:.3}",
                share(total.cached_stateless)
            )
        } else {
            String::new()
        }
    );
    total
}

#[test]
fn coding_sessions_keep_their_prefix_between_rare_compactions() {
    // Compressing every turn from scratch as well costs too much in a debug
    // build: that comparison runs on the smaller file below, and on every
    // file with CTXPRESS_REPLAY_ALL=1.
    let f = run("coding_agent_sessions.jsonl", 32_000, (18, 2), all());
    assert!(f.compactions > 0, "the window was crossed: {f:?}");
    assert!(
        f.compactions * 8 <= f.turns,
        "compactions are rare: {} in {} turns",
        f.compactions,
        f.turns
    );
    assert!(f.request_tokens < f.given_tokens);
    if all() {
        assert!(
            f.cached_session > 2 * f.cached_stateless,
            "the session keeps more of the cache than recompressing every turn: {f:?}"
        );
    }
}

#[test]
fn swe_agent_trajectories_replay() {
    // Windows small enough that some trajectories' system prompt and task
    // alone are over the trigger: the session must not compact every turn.
    let f = run("swe_agent_trajs.jsonl", 12_000, (1, 13), true);
    assert!(f.turns > 100 && f.compactions > 0, "{f:?}");
    // Most of these stay under the window, where both send the history.
    assert!(
        f.cached_session > f.cached_stateless,
        "the session keeps more of the cache than recompressing every turn: {f:?}"
    );
}
