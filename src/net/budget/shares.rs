//! The budget and its shares (the listeners', a peer's, a connection's), charged and given
//! back under one lock.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::config::ClientLimits;

/// Bodies up to this size may use the small bodies' reserve.
pub const SMALL_BODY_BYTES: usize = 64 * 1024;

/// The part of the budget kept for small bodies: a quarter.
const SMALL_RESERVE_DIVISOR: usize = 4;

/// The part of the budget the proxy listener cannot take, kept for the MCP front: an eighth.
pub const MCP_RESERVE_DIVISOR: usize = 8;

/// The listener a body came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Listener {
    Proxy,
    Mcp,
}

/// Which limit refused a charge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The whole budget, or the part of it this kind of body may take.
    Budget,
    /// `body_buffer_bytes_per_peer`.
    Peer,
    /// `body_buffer_bytes_per_connection`.
    Connection,
}

/// One peer, as the shares count it: an IPv4 address, or an IPv6 address's /64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Peer(IpAddr);

impl Peer {
    pub fn of(addr: IpAddr) -> Peer {
        match addr.to_canonical() {
            IpAddr::V6(v6) => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                Peer(IpAddr::V6(bits.into()))
            }
            v4 => Peer(v4),
        }
    }
}

/// The limits of a budget, in bytes.
#[derive(Debug, Clone, Copy)]
struct Shares {
    total: usize,
    large: usize,
    proxy: usize,
    per_peer: usize,
    per_connection: usize,
}

impl Shares {
    fn of(limits: &ClientLimits) -> Shares {
        let total = limits.body_buffer_bytes;
        Shares {
            total,
            large: total - total / SMALL_RESERVE_DIVISOR,
            proxy: total - total / MCP_RESERVE_DIVISOR,
            per_peer: limits.body_buffer_bytes_per_peer,
            per_connection: limits.body_buffer_bytes_per_connection,
        }
    }
}

/// What is held now. The peers map has an entry per peer holding something (so no more than
/// there are bodies being read, which the connection limits bound); an entry is removed when
/// its peer holds nothing.
#[derive(Debug, Default)]
struct Ledger {
    held: usize,
    large: usize,
    proxy: usize,
    peers: HashMap<(Listener, Peer), usize>,
}

#[derive(Debug)]
struct Pool {
    shares: Shares,
    ledger: Mutex<Ledger>,
}

impl Pool {
    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        // Nothing panics while holding it; a poisoned ledger's counts are still whole.
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One connection's account: its listener, its peer, and what its bodies hold now (changed
/// only under the ledger's lock).
#[derive(Debug)]
struct Account {
    listener: Listener,
    peer: Peer,
    held: AtomicUsize,
}

/// The bytes of request bodies held in memory at once, and the shares above.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    pool: Arc<Pool>,
    account: Option<Arc<Account>>,
}

/// The part of the budget one body holds; given back when dropped or released.
#[derive(Debug, Default)]
pub struct Held {
    charge: Option<Charge>,
}

#[derive(Debug)]
struct Charge {
    budget: BodyBudget,
    bytes: usize,
    large: usize,
}

impl Held {
    pub fn release(&mut self) {
        if let Some(charge) = self.charge.take() {
            charge.budget.give_back(charge.bytes, charge.large);
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

impl BodyBudget {
    pub fn new(limits: &ClientLimits) -> Self {
        BodyBudget {
            pool: Arc::new(Pool {
                shares: Shares::of(limits),
                ledger: Mutex::default(),
            }),
            account: None,
        }
    }

    /// The budget as one connection on `listener` from `peer` draws on it.
    pub fn connection(&self, listener: Listener, peer: IpAddr) -> BodyBudget {
        let account = Account {
            listener,
            peer: Peer::of(peer),
            held: AtomicUsize::new(0),
        };
        BodyBudget {
            pool: self.pool.clone(),
            account: Some(Arc::new(account)),
        }
    }

    /// The bytes held now, by every body.
    pub fn held(&self) -> usize {
        self.pool.ledger().held
    }

    /// The bytes held now by the bodies from `peer` on `listener`.
    pub fn held_by(&self, listener: Listener, peer: IpAddr) -> usize {
        let ledger = self.pool.ledger();
        ledger
            .peers
            .get(&(listener, Peer::of(peer)))
            .copied()
            .unwrap_or(0)
    }

    /// Takes `n` more bytes of the budget for a body whose buffer is then `size` bytes (one
    /// read, or one toolpulse builds), held by `held`; false when there are not that many left
    /// for it.
    pub fn take(&self, n: usize, size: usize, held: &mut Held) -> bool {
        self.charge(n, size, held).is_ok()
    }

    /// As [`BodyBudget::take`], saying which limit refused. The bytes are charged to the
    /// budget `held` was first charged through, so that they are given back there.
    pub(super) fn charge(&self, n: usize, size: usize, held: &mut Held) -> Result<(), Limit> {
        let charge = held.charge.get_or_insert_with(|| Charge {
            budget: self.clone(),
            bytes: 0,
            large: 0,
        });
        let large = size > SMALL_BODY_BYTES;
        charge.budget.debit(n, large)?;
        charge.bytes += n;
        if large {
            charge.large += n;
        }
        Ok(())
    }

    fn debit(&self, n: usize, large: bool) -> Result<(), Limit> {
        let shares = &self.pool.shares;
        let mut ledger = self.pool.ledger();
        let over = |held: usize, limit: usize| held.checked_add(n).is_none_or(|h| h > limit);
        let proxy = self
            .account
            .as_ref()
            .is_none_or(|a| a.listener == Listener::Proxy);
        if let Some(account) = &self.account {
            if over(account.held.load(Ordering::Relaxed), shares.per_connection) {
                return Err(Limit::Connection);
            }
            let key = (account.listener, account.peer);
            let peer = ledger.peers.get(&key).copied().unwrap_or(0);
            if over(peer, shares.per_peer) {
                return Err(Limit::Peer);
            }
        }
        if over(ledger.held, shares.total)
            || (large && over(ledger.large, shares.large))
            || (proxy && over(ledger.proxy, shares.proxy))
        {
            return Err(Limit::Budget);
        }
        ledger.held += n;
        if large {
            ledger.large += n;
        }
        if proxy {
            ledger.proxy += n;
        }
        if let Some(account) = &self.account {
            account.held.fetch_add(n, Ordering::Relaxed);
            *ledger
                .peers
                .entry((account.listener, account.peer))
                .or_default() += n;
        }
        Ok(())
    }

    fn give_back(&self, n: usize, large: usize) {
        let mut ledger = self.pool.ledger();
        // Only what was debited comes back; saturating all the same, as a drop must not panic.
        ledger.held = ledger.held.saturating_sub(n);
        ledger.large = ledger.large.saturating_sub(large);
        if self
            .account
            .as_ref()
            .is_none_or(|a| a.listener == Listener::Proxy)
        {
            ledger.proxy = ledger.proxy.saturating_sub(n);
        }
        if let Some(account) = &self.account {
            let left = account.held.load(Ordering::Relaxed).saturating_sub(n);
            account.held.store(left, Ordering::Relaxed);
            let key = (account.listener, account.peer);
            if let Some(peer) = ledger.peers.get_mut(&key) {
                *peer = peer.saturating_sub(n);
                if *peer == 0 {
                    ledger.peers.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
