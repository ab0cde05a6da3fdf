//! [`Server`]: an axum app on 127.0.0.1 with a thread and runtime of its own.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;

/// A running loopback server; dropping it stops the server at once (open connections and
/// handlers still waiting included).
pub struct Server {
    /// The base URL, `http://127.0.0.1:PORT/v1`.
    pub base: String,
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Serves an OpenAI-like API of `chat` (`/v1/chat/completions`) and `models`
    /// (`/v1/models`) sharing `state`, on a free loopback port.
    pub(crate) fn start_openai<S: Clone + Send + Sync + 'static>(
        chat: axum::routing::MethodRouter<S>,
        models: axum::routing::MethodRouter<S>,
        state: S,
    ) -> Self {
        Self::start_openai_on(0, chat, models, state)
    }

    /// [`Server::start_openai`] on loopback port `port` (0: a free one).
    pub(crate) fn start_openai_on<S: Clone + Send + Sync + 'static>(
        port: u16,
        chat: axum::routing::MethodRouter<S>,
        models: axum::routing::MethodRouter<S>,
        state: S,
    ) -> Self {
        Self::start_on(
            port,
            Router::new()
                .route("/v1/chat/completions", chat)
                .route("/v1/models", models)
                .with_state(state),
        )
    }

    /// Serves `app` on a free loopback port.
    pub fn start(app: Router) -> Self {
        Self::start_on(0, app)
    }

    /// Serves `app` on loopback port `port` (0: a free one), e.g. again on the port of a
    /// server stopped earlier, to play a server that was down and is back.
    pub fn start_on(port: u16, app: Router) -> Self {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                    .await
                    .unwrap();
                addr_tx.send(listener.local_addr().unwrap()).unwrap();
                // Do not wait for hanging handlers on shutdown: stop serving at once.
                let serve = async { axum::serve(listener, app).await };
                tokio::select! {
                    r = serve => r.unwrap(),
                    _ = stop_rx => {}
                }
            });
            rt.shutdown_timeout(Duration::from_millis(100));
        });
        let addr = addr_rx.recv().unwrap();
        Self {
            base: format!("http://{addr}/v1"),
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Stops the server now (connections and hanging handlers included).
    pub fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A loopback port nothing listens on at the moment of the call.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}
