//! Placeholder: the token text splitter (being written).
#![allow(missing_docs)]
use crate::text::SharedTokenizer;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    #[error("chunk size must be positive")]
    ZeroChunkSize,
}

#[derive(Debug, Clone)]
pub struct TokenTextSplitter {
    pub chunk_size: usize,
    pub chunk_overlap: usize,
    pub tokenizer: SharedTokenizer,
}
