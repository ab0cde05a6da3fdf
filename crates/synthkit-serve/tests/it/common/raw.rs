//! A raw HTTP/1.1 client for the hostile-client tests: it sends exactly the bytes given
//! (any Host, any header, half a request) and reads what comes back, every step under a
//! deadline.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    missing_docs
)]

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

use super::DEADLINE;

/// An answer as read off the wire.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// Header names lowercased; repeated headers joined with ", ".
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as JSON (panics with the body when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "status {}: the body is not JSON ({e}): {:?}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }

    /// Fails the test unless the answer allows the browser origin `origin` (CORS).
    #[track_caller]
    pub fn assert_allows_origin(&self, origin: &str) {
        let allowed = self.header("access-control-allow-origin");
        assert_eq!(allowed, Some(origin), "{self:?}");
    }

    /// Checks the documented error body: JSON `{"error": {"kind", "message"}}`.
    pub fn assert_error(&self, status: u16, kind: &str) {
        assert_eq!(self.status, status, "{self:?}");
        assert!(
            self.header("content-type")
                .is_some_and(|c| c.starts_with("application/json")),
            "status {status} without a JSON content type: {self:?}"
        );
        let body = self.json();
        assert_eq!(body["error"]["kind"], kind, "{body}");
        let message = body["error"]["message"].as_str().unwrap_or("");
        assert!(
            message.len() > 20,
            "a message that says what to change: {body}"
        );
    }
}

/// `host:port` of a service URL `http://host:port`.
pub fn addr_of(url: &str) -> String {
    url.trim_start_matches("http://").to_string()
}

/// Sends `request` on a new connection and reads one answer.
pub async fn send(addr: &str, request: &[u8]) -> Answer {
    let mut stream = timeout(DEADLINE, TcpStream::connect(addr))
        .await
        .expect("connect timed out")
        .unwrap();
    timeout(DEADLINE, stream.write_all(request))
        .await
        .expect("write timed out")
        .unwrap();
    read_answer(&mut stream).await
}

/// A request with `method`, `target`, the headers given (`Host: localhost` unless one is
/// given) and `body`.
pub fn request(method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        out.push_str("Host: localhost\r\n");
    }
    for (name, value) in headers {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Reads one answer (head, then a body framed by Content-Length or chunked).
pub async fn read_answer(stream: &mut (impl AsyncRead + Unpin)) -> Answer {
    let deadline = Instant::now() + DEADLINE;
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        read_more(stream, &mut buf, deadline).await;
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {head:?}"));
    let mut headers: BTreeMap<String, String> = BTreeMap::new();
    for line in lines.filter(|l| !l.is_empty()) {
        if let Some((name, value)) = line.split_once(':') {
            headers
                .entry(name.trim().to_ascii_lowercase())
                .and_modify(|v| {
                    v.push_str(", ");
                    v.push_str(value.trim());
                })
                .or_insert_with(|| value.trim().to_string());
        }
    }
    let mut rest = buf[head_end..].to_vec();
    let body = if let Some(len) = headers.get("content-length") {
        let len: usize = len.parse().unwrap();
        while rest.len() < len {
            read_more(stream, &mut rest, deadline).await;
        }
        rest.truncate(len);
        rest
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        dechunk(stream, rest, deadline).await
    } else {
        Vec::new()
    };
    Answer {
        status,
        headers,
        body,
    }
}

async fn dechunk(
    stream: &mut (impl AsyncRead + Unpin),
    mut rest: Vec<u8>,
    deadline: Instant,
) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let line_end = loop {
            if let Some(i) = find(&rest, b"\r\n") {
                break i;
            }
            read_more(stream, &mut rest, deadline).await;
        };
        let size_text = String::from_utf8_lossy(&rest[..line_end]).to_string();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        rest.drain(..line_end + 2);
        while rest.len() < size + 2 {
            read_more(stream, &mut rest, deadline).await;
        }
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&rest[..size]);
        rest.drain(..size + 2);
    }
}

async fn read_more(stream: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>, deadline: Instant) {
    let mut chunk = [0u8; 16 * 1024];
    let n = tokio::time::timeout_at(deadline, stream.read(&mut chunk))
        .await
        .expect("the answer did not come in time")
        .expect("the connection failed");
    assert!(
        n > 0,
        "the connection closed before the answer was complete: {:?}",
        String::from_utf8_lossy(buf)
    );
    buf.extend_from_slice(&chunk[..n]);
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Waits until the server closes `stream` (end of file or a reset), for at most `limit`;
/// how long that took, or `None` if it stayed open. Bytes the server sends first (a 408)
/// are read and dropped.
pub async fn closed_within(
    stream: &mut (impl AsyncRead + Unpin),
    limit: Duration,
) -> Option<Duration> {
    let started = Instant::now();
    let deadline = started + limit;
    let mut chunk = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
        }
    }
}
