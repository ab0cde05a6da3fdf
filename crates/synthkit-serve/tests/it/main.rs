//! The service's integration tests, in one binary (one link, one process; the modules
//! share `common`'s helpers). Every server they talk to is on loopback: the service
//! itself, `synthkit_testkit`'s fake model, a real llama-server (`anthropic`) and, with the
//! `redis` feature, a real `redis-server` (`scale_out`). No test depends on another's
//! state: each starts its own service, fake and Redis (with keys of its own).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod anthropic;
mod api;
mod costs;
mod guard;
mod hostile;
mod money;
mod nodes;
mod report;
#[cfg(feature = "redis")]
mod scale_out;
mod schema_cost;
