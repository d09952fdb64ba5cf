//! A loopback TCP proxy in front of the Postgres server that counts the
//! client's round trips: every `Sync` (extended protocol: one per
//! prepared-statement execution or preparation) and every simple `Query`
//! message is one request the client then waits on. It also counts the
//! statements: every `Execute` and every simple `Query` message.
//!
//! It can also put the server at a distance (`cargo xtask bench
//! --latency-ms N`): every chunk of bytes, in either direction, is
//! forwarded `N` ms after it arrived (a one-way delay, as `tc netem` adds
//! it; chunks in flight overlap, so throughput is not capped), so each
//! round trip costs `2 N` ms more.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// SSLRequest / GSSENCRequest codes of an untyped startup-phase message.
const ENCRYPTION_REQUESTS: [u32; 2] = [80_877_103, 80_877_104];

/// The running proxy.
#[derive(Debug)]
pub struct Proxy {
    port: u16,
    round_trips: Arc<AtomicU64>,
    statements: Arc<AtomicU64>,
}

impl Proxy {
    /// Listens on `127.0.0.1:0` and forwards each connection to `upstream` (`host:port`).
    pub fn start(upstream: String) -> Result<Self> {
        Self::start_delayed(upstream, Duration::ZERO)
    }

    /// [`Proxy::start`] adding `delay` to each direction.
    pub fn start_delayed(upstream: String, delay: Duration) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let round_trips = Arc::new(AtomicU64::new(0));
        let statements = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&round_trips);
        let statement_counter = Arc::clone(&statements);
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
                let statement_counter = Arc::clone(&statement_counter);
                thread::spawn(move || {
                    let mut count = MessageCounter::new(&counter, &statement_counter);
                    pump(client, server, delay, |bytes| count.feed(bytes));
                });
                thread::spawn(move || pump(server2, client2, delay, |_| {}));
            }
        });
        Ok(Self {
            port,
            round_trips,
            statements,
        })
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

    /// Zeroes the counters.
    pub fn reset(&self) {
        self.round_trips.store(0, Ordering::SeqCst);
        self.statements.store(0, Ordering::SeqCst);
    }

    /// Statements (`Execute` and `Query` messages) since the last reset.
    pub fn statements(&self) -> u64 {
        self.statements.load(Ordering::SeqCst)
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

/// Copies `from` → `to` until either side ends, showing each chunk to
/// `inspect` before it is forwarded (so a count is complete once the client
/// has its answer); with a `delay`, each chunk leaves `delay` after it came.
fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration, mut inspect: impl FnMut(&[u8])) {
    let mut buf = [0u8; 64 * 1024];
    if delay.is_zero() {
        while let Ok(n @ 1..) = from.read(&mut buf) {
            inspect(&buf[..n]);
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
        return;
    }
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = thread::spawn(move || {
        for (due, bytes) in rx {
            let now = Instant::now();
            if due > now {
                // The delay itself: this is the simulated wire, not a wait
                // for another thread.
                thread::sleep(due - now);
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
    while let Ok(n @ 1..) = from.read(&mut buf) {
        inspect(&buf[..n]);
        if tx
            .send((Instant::now() + delay, buf[..n].to_vec()))
            .is_err()
        {
            break;
        }
    }
    drop(tx);
    let _ = writer.join();
}

/// Counts `Sync` and `Query` messages (round trips) and `Execute` and
/// `Query` messages (statements) in the client → server byte stream.
struct MessageCounter<'c> {
    counter: &'c AtomicU64,
    statements: &'c AtomicU64,
    pending: Vec<u8>,
    startup: bool,
}

impl<'c> MessageCounter<'c> {
    fn new(counter: &'c AtomicU64, statements: &'c AtomicU64) -> Self {
        Self {
            counter,
            statements,
            pending: Vec::new(),
            startup: true,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        let pending = &mut self.pending;
        pending.extend_from_slice(bytes);
        loop {
            let header = usize::from(!self.startup);
            if pending.len() < header + 4 {
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
            if self.startup {
                let code = pending
                    .get(4..8)
                    .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                self.startup = code.is_some_and(|c| ENCRYPTION_REQUESTS.contains(&c));
            } else {
                if matches!(pending[0], b'S' | b'Q') {
                    self.counter.fetch_add(1, Ordering::SeqCst);
                }
                if matches!(pending[0], b'E' | b'Q') {
                    self.statements.fetch_add(1, Ordering::SeqCst);
                }
            }
            pending.drain(..total);
        }
    }
}
