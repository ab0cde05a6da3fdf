//! Text handling: tokenizers and the token text splitter.

pub mod plain;
pub mod printable;
pub mod splitter;
pub mod thinking;
pub mod tokenizer;

pub use splitter::{Chunk, ChunkCursor, SplitError, TokenTextSplitter};
pub use tokenizer::{BpeTokenizer, SharedTokenizer, Tokenizer, TokenizerError};
