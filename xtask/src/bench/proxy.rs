//! A loopback TCP proxy in front of the Postgres server that counts the
//! client's round trips: every `Sync` (extended protocol: one per
//! prepared-statement execution or preparation) and every simple `Query`
//! message is one request the client then waits on.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use anyhow::{bail, Context, Result};

/// SSLRequest / GSSENCRequest codes of an untyped startup-phase message.
const ENCRYPTION_REQUESTS: [u32; 2] = [80_877_103, 80_877_104];

/// The running proxy.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    round_trips: Arc<AtomicU64>,
}

impl Proxy {
    /// Listens on `127.0.0.1:0` and forwards each connection to `upstream` (`host:port`).
    pub fn start(upstream: String) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let round_trips = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&round_trips);
        thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect(&upstream) else {
                    let _ = client.shutdown(Shutdown::Both);
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (Ok(client2), Ok(server2)) = (client.try_clone(), server.try_clone()) else {
                    continue;
                };
                let counter = Arc::clone(&counter);
                thread::spawn(move || forward_counting(client, server, &counter));
                thread::spawn(move || forward(server2, client2));
            }
        });
        Ok(Self { port, round_trips })
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url(&self, url: &str) -> Result<String> {
        let (scheme, rest) = url
            .split_once("://")
            .context("the Postgres URL needs a scheme")?;
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let user = authority.rfind('@').map_or("", |at| &authority[..=at]);
        Ok(format!("{scheme}://{user}127.0.0.1:{}{tail}", self.port))
    }

    /// Zeroes the counter.
    pub fn reset(&self) {
        self.round_trips.store(0, Ordering::SeqCst);
    }

    /// Round trips since the last reset.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::SeqCst)
    }
}

/// `host:port` of a Postgres URL (TCP hosts only).
pub fn upstream(url: &str) -> Result<String> {
    let config: postgres::Config = url.parse()?;
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(host)) => host.clone(),
        _ => bail!("round trips are counted on TCP connections only"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    Ok(format!("{host}:{port}"))
}

fn forward(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

/// Copies client → server, counting `Sync` and `Query` messages. Bytes are
/// counted before they are forwarded, so a count is complete once the
/// client has its answer.
fn forward_counting(mut from: TcpStream, mut to: TcpStream, counter: &AtomicU64) {
    let mut pending: Vec<u8> = Vec::new();
    let mut startup = true;
    let mut buf = [0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        loop {
            let (header, body_len) = if startup { (0, 4) } else { (1, 4) };
            if pending.len() < header + body_len {
                break;
            }
            let len_bytes = [
                pending[header],
                pending[header + 1],
                pending[header + 2],
                pending[header + 3],
            ];
            let len = u32::from_be_bytes(len_bytes) as usize;
            let total = header + len;
            if pending.len() < total {
                break;
            }
            if startup {
                let code = pending
                    .get(4..8)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                startup = code.is_some_and(|c| ENCRYPTION_REQUESTS.contains(&c));
            } else if matches!(pending[0], b'S' | b'Q') {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            pending.drain(..total);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
