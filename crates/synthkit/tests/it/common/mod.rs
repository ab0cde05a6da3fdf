//! What several modules of the suite share.

pub mod chunks;
pub mod clock;
pub mod fixtures;
pub mod logs;
pub mod replay;
pub mod tokenize;
