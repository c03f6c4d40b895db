//! Run futures with at most `limit` in flight, on any executor.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;

/// Await every future of `futs` with at most `limit` (at least 1) polled
/// concurrently, starting the next as soon as one finishes. Results come back
/// in input order. Executor-agnostic: everything runs inside the calling task.
pub async fn run_bounded<F, T>(futs: Vec<F>, limit: usize) -> Vec<T>
where
    F: Future<Output = T>,
{
    let limit = limit.max(1);
    let n = futs.len();
    let mut pending: VecDeque<(usize, F)> = futs.into_iter().enumerate().collect();
    let mut running: Vec<(usize, Pin<Box<F>>)> = Vec::with_capacity(limit.min(n));
    let mut results: Vec<Option<T>> = (0..n).map(|_| None).collect();
    poll_fn(|cx| {
        loop {
            while running.len() < limit {
                match pending.pop_front() {
                    Some((i, f)) => running.push((i, Box::pin(f))),
                    None => break,
                }
            }
            let mut finished = false;
            let mut k = 0;
            while k < running.len() {
                let ready = match running.get_mut(k) {
                    Some((_, f)) => f.as_mut().poll(cx),
                    None => break,
                };
                match ready {
                    Poll::Ready(v) => {
                        let (i, _) = running.swap_remove(k);
                        if let Some(slot) = results.get_mut(i) {
                            *slot = Some(v);
                        }
                        finished = true;
                    }
                    Poll::Pending => k += 1,
                }
            }
            if running.is_empty() && pending.is_empty() {
                return Poll::Ready(());
            }
            if !finished {
                return Poll::Pending;
            }
        }
    })
    .await;
    results.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn bound_and_order() {
        let now = Arc::new(AtomicUsize::new(0));
        let max = Arc::new(AtomicUsize::new(0));
        let futs: Vec<_> = (0..20u64)
            .map(|i| {
                let (now, max) = (now.clone(), max.clone());
                async move {
                    let c = now.fetch_add(1, Ordering::SeqCst) + 1;
                    max.fetch_max(c, Ordering::SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(1 + (i * 7) % 5)).await;
                    now.fetch_sub(1, Ordering::SeqCst);
                    i
                }
            })
            .collect();
        let out = run_bounded(futs, 3).await;
        assert_eq!(out, (0..20).collect::<Vec<_>>());
        assert_eq!(max.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn zero_limit_means_one_and_empty_is_fine() {
        let out = run_bounded(vec![std::future::ready(1), std::future::ready(2)], 0).await;
        assert_eq!(out, vec![1, 2]);
        let none: Vec<std::future::Ready<u8>> = Vec::new();
        assert!(run_bounded(none, 4).await.is_empty());
    }
}
