//! The TLS crypto provider of the HTTP clients (features `openai`, `anthropic`, `otel`).
//!
//! reqwest is built without a provider of its own (its default, aws-lc-rs, is a large C
//! build); every client synthkit builds first calls [`install_default_provider`], which
//! installs rustls's `ring` provider as the process default unless the program installed
//! one already (then that one is kept).

/// Installs rustls's `ring` crypto provider as the process default, unless one is
/// installed already. Call it before building a `reqwest::Client` of your own in a
/// program that uses synthkit's HTTP features; calling it again does nothing.
pub fn install_default_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // An error means another thread installed one first: that one is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_clients_build_with_the_provider() {
        install_default_provider();
        install_default_provider();
        assert!(rustls::crypto::CryptoProvider::get_default().is_some());
        let client = reqwest::Client::builder().build();
        assert!(client.is_ok());
        let request = client
            .ok()
            .and_then(|c| c.get("https://api.openai.com/v1/models").build().ok());
        assert!(request.is_some());
    }
}
