//! The application: `serve` starts the listeners and wires the features together; the admin
//! listener; the demo.

pub mod admin;
pub mod demo;
pub mod serve;
