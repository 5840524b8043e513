//! Profile `hosted` outside the stream: the ids of hosted items ([`id`]), the store of the
//! gateway's pairs behind them ([`store`], for every replica [`shared`]), and the next turn's request body, where hosted
//! items become those pairs again ([`request`]). The stream itself is rewritten by the core
//! (`rewrite`, `profiles::hosted`); docs/hosted.md is the contract.

pub mod id;
pub mod json;
pub mod refusal;
pub mod request;
pub mod scan;
pub mod share;
pub mod shared;
pub mod shared_key;
pub mod store;
