//! Cooperative cancellation of a running level (e.g. on Ctrl-C).

use std::sync::Arc;

use tokio::sync::watch;

/// A cloneable flag: once cancelled, every clone sees it. In-flight requests end as
/// `cancelled` records and no new request is sent.
#[derive(Debug, Clone)]
pub struct CancelToken {
    tx: Arc<watch::Sender<bool>>,
    rx: watch::Receiver<bool>,
}

impl Default for CancelToken {
    fn default() -> Self {
        Self::new()
    }
}

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        let (tx, rx) = watch::channel(false);
        CancelToken {
            tx: Arc::new(tx),
            rx,
        }
    }

    /// Cancels (idempotent).
    pub fn cancel(&self) {
        self.tx.send_replace(true);
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once cancelled.
    pub async fn cancelled(&self) {
        let mut rx = self.rx.clone();
        // `wait_for` only errs when every sender is gone, and this token holds one.
        let _ = rx.wait_for(|c| *c).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn clones_see_the_cancel() {
        let a = CancelToken::new();
        let b = a.clone();
        assert!(!b.is_cancelled());
        let waiter = tokio::spawn(async move { b.cancelled().await });
        a.cancel();
        waiter.await.unwrap();
        assert!(a.is_cancelled());
    }
}
