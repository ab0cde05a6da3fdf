//! Test doubles (placeholder).
