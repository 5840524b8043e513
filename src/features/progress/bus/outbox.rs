//! Reports for calls open on other replicas, on their way to those replicas' channels.
//!
//! Coalescing like a stream's inbox: one report per MCP call; a newer one replaces an older one
//! not yet published, so a chatty tool cannot grow memory or wait for Redis. One publisher task
//! drains it in order, one pipeline per batch, so each call's reports arrive in order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::keys::{Message, Owner, replica_channel};
use super::link::Link;
use crate::features::progress::Progress;
use crate::metrics::BusOp;

/// MCP calls with a report waiting to be published; beyond it, reports are dropped (counted).
pub const MAX_OUTBOX_CALLS: usize = 4096;

#[derive(Default)]
pub struct Outbox {
    pending: Mutex<Pending>,
    wake: Notify,
}

#[derive(Default)]
struct Pending {
    /// Bindings in the order their first pending report came.
    order: Vec<u64>,
    reports: HashMap<u64, (Owner, Progress)>,
}

impl Outbox {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `report` for `owner`'s replica; false when the outbox is full.
    pub fn put(&self, binding: u64, owner: &Owner, report: Progress) -> bool {
        let mut pending = self.pending();
        if let Some(slot) = pending.reports.get_mut(&binding) {
            slot.1 = report;
        } else if pending.reports.len() >= MAX_OUTBOX_CALLS {
            return false;
        } else {
            pending.order.push(binding);
            pending.reports.insert(binding, (owner.clone(), report));
        }
        drop(pending);
        self.wake.notify_one();
        true
    }

    fn take(&self) -> Vec<(Owner, Progress)> {
        let mut pending = self.pending();
        let order = std::mem::take(&mut pending.order);
        order
            .into_iter()
            .filter_map(|b| pending.reports.remove(&b))
            .collect()
    }

    /// Publishes what is queued, batch by batch, until the process ends.
    pub async fn publish(self: Arc<Self>, link: Arc<Link>) {
        loop {
            self.wake.notified().await;
            let batch = self.take();
            if batch.is_empty() {
                continue;
            }
            if !link.is_up() {
                link.count_error(BusOp::Publish, batch.len() as u64);
                continue;
            }
            let mut pipe = redis::pipe();
            for (owner, report) in batch {
                let channel = replica_channel(&link.prefix, &owner.replica);
                let message = Message::progress(&owner, report).encode();
                pipe.cmd("PUBLISH").arg(channel).arg(message).ignore();
            }
            let mut conn = link.conn();
            link.run(BusOp::Publish, pipe.query_async::<()>(&mut conn))
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(n: f64) -> Progress {
        Progress {
            progress: n,
            total: None,
            message: None,
        }
    }

    #[test]
    fn newest_report_per_call_in_first_come_order_and_bounded() {
        let outbox = Outbox::default();
        let owner = |c: &str| Owner {
            replica: "r".into(),
            stream: 1,
            call_id: c.into(),
        };
        assert!(outbox.put(2, &owner("b"), report(1.0)));
        assert!(outbox.put(1, &owner("a"), report(1.0)));
        assert!(outbox.put(2, &owner("b"), report(2.0)));
        let taken: Vec<(String, f64)> = outbox
            .take()
            .into_iter()
            .map(|(o, p)| (o.call_id, p.progress))
            .collect();
        assert_eq!(taken, [("b".to_string(), 2.0), ("a".to_string(), 1.0)]);
        assert!(outbox.take().is_empty());
        for i in 0..MAX_OUTBOX_CALLS as u64 {
            assert!(outbox.put(i, &owner("x"), report(0.0)));
        }
        assert!(!outbox.put(u64::MAX, &owner("x"), report(0.0)), "full");
        assert!(
            outbox.put(0, &owner("x"), report(1.0)),
            "a queued call is replaced"
        );
    }
}
