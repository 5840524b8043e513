//! The budget's shares, charged and given back.

use std::net::IpAddr;

use super::*;

const MIB: usize = 1 << 20;

fn limits(total: usize, per_peer: usize, per_connection: usize) -> ClientLimits {
    ClientLimits {
        body_buffer_bytes: total,
        body_buffer_bytes_per_peer: per_peer,
        body_buffer_bytes_per_connection: per_connection,
        ..ClientLimits::default()
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse().expect("an address")
}

#[test]
fn the_budget_is_taken_and_given_back_and_a_quarter_is_kept_for_small_bodies() {
    let budget = BodyBudget::new(&limits(8 * MIB, 8 * MIB, 8 * MIB));
    let mut large = Held::default();
    assert!(budget.take(4 * MIB, 4 * MIB, &mut large));
    assert!(budget.take(2 * MIB, 6 * MIB, &mut large));
    assert_eq!(budget.held(), 6 * MIB);
    let mut other = Held::default();
    assert!(
        !budget.take(MIB, MIB, &mut other),
        "large bodies get three quarters"
    );
    let mut small = Held::default();
    assert!(
        budget.take(1000, 1000, &mut small),
        "a small body still fits"
    );
    assert_eq!(budget.held(), 6 * MIB + 1000);
    drop(large);
    small.release();
    assert_eq!(budget.held(), 0);
    assert!(budget.take(6 * MIB, 6 * MIB, &mut other));
}

#[test]
fn one_peer_holds_at_most_its_share_and_the_others_still_get_theirs() {
    let budget = BodyBudget::new(&limits(64 * MIB, 8 * MIB, 5 * MIB));
    let attacker = ip("10.0.0.1");
    let mut held = Vec::new();
    for _ in 0..2 {
        let connection = budget.connection(Listener::Proxy, attacker);
        let mut body = Held::default();
        assert_eq!(connection.charge(4 * MIB, 4 * MIB, &mut body), Ok(()));
        held.push(body);
    }
    let third = budget.connection(Listener::Proxy, attacker);
    let mut refused = Held::default();
    assert_eq!(
        third.charge(1000, 1000, &mut refused),
        Err(Limit::Peer),
        "its share is spent, even for a small body"
    );
    assert_eq!(budget.held_by(Listener::Proxy, attacker), 8 * MIB);
    let other = budget.connection(Listener::Proxy, ip("10.0.0.2"));
    let mut body = Held::default();
    assert_eq!(other.charge(4 * MIB, 4 * MIB, &mut body), Ok(()));
    let mcp = budget.connection(Listener::Mcp, attacker);
    assert_eq!(
        mcp.charge(MIB, MIB, &mut Held::default()),
        Ok(()),
        "a peer's share is counted per listener"
    );
    drop(held);
    assert_eq!(budget.held_by(Listener::Proxy, attacker), 0);
    assert_eq!(budget.held(), 4 * MIB);
}

#[test]
fn one_connection_holds_at_most_its_share() {
    let budget = BodyBudget::new(&limits(64 * MIB, 16 * MIB, 5 * MIB));
    let connection = budget.connection(Listener::Proxy, ip("10.0.0.1"));
    let mut first = Held::default();
    assert_eq!(connection.charge(4 * MIB, 4 * MIB, &mut first), Ok(()));
    let mut second = Held::default();
    assert_eq!(
        connection.charge(2 * MIB, 2 * MIB, &mut second),
        Err(Limit::Connection)
    );
    let again = budget.connection(Listener::Proxy, ip("10.0.0.1"));
    assert_eq!(again.charge(2 * MIB, 2 * MIB, &mut Held::default()), Ok(()));
    drop(first);
    assert_eq!(
        connection.charge(4 * MIB, 4 * MIB, &mut Held::default()),
        Ok(())
    );
}

#[test]
fn the_proxy_listener_leaves_an_eighth_to_the_mcp_front() {
    let budget = BodyBudget::new(&limits(8 * MIB, 8 * MIB, 8 * MIB));
    let mut small = Vec::new();
    // Small bodies from many peers fill all the proxy listener may take.
    for i in 0..(7 * MIB / SMALL_BODY_BYTES) {
        let peer = IpAddr::from([10, 0, (i >> 8) as u8, i as u8]);
        let connection = budget.connection(Listener::Proxy, peer);
        let mut body = Held::default();
        assert_eq!(
            connection.charge(SMALL_BODY_BYTES, SMALL_BODY_BYTES, &mut body),
            Ok(())
        );
        small.push(body);
    }
    let more = budget.connection(Listener::Proxy, ip("10.1.0.0"));
    assert_eq!(more.charge(1, 1, &mut Held::default()), Err(Limit::Budget));
    let gateway = budget.connection(Listener::Mcp, ip("10.9.9.9"));
    assert_eq!(gateway.charge(MIB, 1000, &mut Held::default()), Ok(()));
}

#[test]
fn an_ipv6_peer_is_its_64_and_a_mapped_ipv4_address_is_the_ipv4_one() {
    assert_eq!(
        Peer::of(ip("2001:db8::1")),
        Peer::of(ip("2001:db8::ffff:2"))
    );
    assert_ne!(Peer::of(ip("2001:db8::1")), Peer::of(ip("2001:db8:0:1::1")));
    assert_eq!(Peer::of(ip("::ffff:10.0.0.1")), Peer::of(ip("10.0.0.1")));
}
