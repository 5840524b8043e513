//! The third round of attacks (hostile clients and gateways, the next-turn store), on real
//! sockets, a module per area. Every limit is set small in each test's config so it runs in a
//! second or two; each test waits for an event, never for a deadline a loaded machine can miss.

mod bodies;
mod hosted;
mod listeners;
mod streams;
