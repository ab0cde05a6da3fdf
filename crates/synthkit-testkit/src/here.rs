//! [`serve`]: an axum app on 127.0.0.1 served by the *calling* runtime.
//!
//! For tests that must share one runtime with the server: on a current-thread runtime, a
//! client that blocked its thread (instead of awaiting) would stall the server too, so the
//! test hangs where a server on its own thread ([`crate::Server`]) would hide the block.

use axum::Router;

/// Serves `app` on a free loopback port as a task of the current runtime, until that
/// runtime shuts down; returns its base URL, `http://127.0.0.1:PORT/v1`.
pub async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v1")
}
