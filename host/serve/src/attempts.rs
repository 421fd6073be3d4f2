//! Failed bearer tokens, counted per client address: past
//! `Limits::token_attempts` failures within `Limits::token_attempt_window`,
//! the address's requests are refused (`429`, `Retry-After`: the rest of
//! the window) before their token is looked at, so guessing a token costs
//! a window per few guesses. A request that presents no token is not an
//! attempt; a good token counts nothing.
//!
//! An IPv6 client is counted by its /64 (one host usually holds the whole
//! prefix). The table holds at most [`MAX_ADDRESSES`] addresses: an
//! address whose window ended is forgotten, and when the table is full of
//! live windows the oldest is dropped, so memory stays bounded whatever
//! number of addresses a client spreads its guesses over.
//!
//! The address is the TCP peer's: behind a reverse proxy every client has
//! the proxy's, and one guesser locks them all out for a window.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Addresses tracked at most.
pub(crate) const MAX_ADDRESSES: usize = 4096;

/// One address's failures since `start`.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: Instant,
    failures: u32,
}

#[derive(Debug)]
pub(crate) struct TokenAttempts {
    /// Failures allowed in a window; `0`: not counted at all.
    limit: u32,
    window: Duration,
    table: Mutex<HashMap<IpAddr, Window>>,
}

impl TokenAttempts {
    pub(crate) fn new(limit: u32, window: Duration) -> Self {
        Self {
            limit,
            window,
            table: Mutex::default(),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Window>> {
        // Every change is a whole insert or remove: a poisoned table is
        // consistent.
        self.table
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// `Err(seconds)` while `peer` is past its failures: how long until its
    /// window ends (at least 1).
    pub(crate) fn check(&self, peer: IpAddr, now: Instant) -> Result<(), u64> {
        if self.limit == 0 {
            return Ok(());
        }
        let key = key(peer);
        let mut table = self.table();
        let Some(seen) = table.get(&key).copied() else {
            return Ok(());
        };
        let elapsed = now.saturating_duration_since(seen.start);
        if elapsed >= self.window {
            table.remove(&key);
            return Ok(());
        }
        if seen.failures < self.limit {
            return Ok(());
        }
        let left = self.window - elapsed;
        let seconds = left.as_secs() + u64::from(left.subsec_nanos() > 0);
        Err(seconds.max(1))
    }

    /// `peer` presented a token that names no tenant.
    pub(crate) fn failed(&self, peer: IpAddr, now: Instant) {
        if self.limit == 0 {
            return;
        }
        let key = key(peer);
        let window = self.window;
        let mut table = self.table();
        let live = |seen: &Window| now.saturating_duration_since(seen.start) < window;
        if let Some(seen) = table.get_mut(&key)
            && live(seen)
        {
            seen.failures = seen.failures.saturating_add(1);
            return;
        }
        if !table.contains_key(&key) && table.len() >= MAX_ADDRESSES {
            table.retain(|_, seen| live(seen));
            if table.len() >= MAX_ADDRESSES
                && let Some(oldest) = table
                    .iter()
                    .min_by_key(|(_, seen)| seen.start)
                    .map(|(address, _)| *address)
            {
                table.remove(&oldest);
            }
        }
        table.insert(
            key,
            Window {
                start: now,
                failures: 1,
            },
        );
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.table().len()
    }
}

/// What an address is counted as: IPv4 as itself (also when mapped into
/// IPv6), IPv6 by its /64.
fn key(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !((1u128 << 64) - 1))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 1));

    #[test]
    fn past_the_limit_an_address_waits_out_its_window() {
        let attempts = TokenAttempts::new(2, Duration::from_secs(60));
        let start = Instant::now();
        attempts.failed(A, start);
        assert_eq!(attempts.check(A, start), Ok(()));
        attempts.failed(A, start);
        assert_eq!(attempts.check(A, start), Err(60));
        let later = start + Duration::from_millis(59_500);
        assert_eq!(attempts.check(A, later), Err(1));
        let other = IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 2));
        assert_eq!(attempts.check(other, later), Ok(()));
        // The window over, the address is forgotten.
        assert_eq!(attempts.check(A, start + Duration::from_secs(60)), Ok(()));
        assert_eq!(attempts.tracked(), 0);
    }

    #[test]
    fn ipv6_counts_by_its_64_and_mapped_ipv4_as_ipv4() {
        let attempts = TokenAttempts::new(1, Duration::from_secs(60));
        let now = Instant::now();
        attempts.failed("2001:db8::1".parse().expect("v6"), now);
        assert!(
            attempts
                .check("2001:db8::ffff:2".parse().expect("v6"), now)
                .is_err()
        );
        assert!(
            attempts
                .check("2001:db8:0:1::1".parse().expect("v6"), now)
                .is_ok()
        );
        attempts.failed("::ffff:192.0.2.1".parse().expect("mapped"), now);
        assert!(attempts.check(A, now).is_err());
    }

    #[test]
    fn the_table_stays_bounded_and_a_zero_limit_counts_nothing() {
        let attempts = TokenAttempts::new(3, Duration::from_secs(60));
        let now = Instant::now();
        for n in 0..(MAX_ADDRESSES as u32 + 100) {
            let address = IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n));
            attempts.failed(address, now + Duration::from_millis(u64::from(n)));
        }
        assert_eq!(attempts.tracked(), MAX_ADDRESSES);
        let off = TokenAttempts::new(0, Duration::from_secs(60));
        for _ in 0..10 {
            off.failed(A, now);
        }
        assert_eq!((off.check(A, now), off.tracked()), (Ok(()), 0));
    }
}
