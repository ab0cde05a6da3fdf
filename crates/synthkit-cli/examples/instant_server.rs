//! An OpenAI-compatible model on 127.0.0.1 that answers every call at once with a fixed
//! 40-word answer (the bench's instant model, over HTTP): the server of the `synthkit
//! batch` figures (docs/batch.md, "Figures"). Prints its base URL, then serves
//! until its standard input closes.
//!
//! ```sh
//! cargo run --release -p synthkit-cli --example instant_server
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read;

use synthkit_testkit::{FakeConfig, FakeOpenAi};

fn main() {
    let reply = "The text says that iterables raise exceptions when they are exhausted, \
        that generators stop with StopIteration, that errors are caught with try and \
        except, and that a for loop handles the end of an iterable for you, so most code \
        never sees the exception itself.";
    let fake = FakeOpenAi::start(FakeConfig::replying(reply));
    println!("{}", fake.base);
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    println!("{} completion requests", fake.requests());
}
