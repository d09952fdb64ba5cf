//! Counts the client→server round trips of a warm single-row push through a
//! counting TCP proxy (each round trip is one flush of the client followed by
//! a wait for the reply, so it arrives at the proxy as one read).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;

use common::*;
use postgres::config::Host;
use postgres::NoTls;
use r2d2_postgres::PostgresConnectionManager;
use sync_core::{EnsureOptions, ServerStorage, StoredPushResult};
use sync_postgres::PostgresStorage;

/// Forwards a local port to the server and counts client writes.
fn proxy(upstream: (String, u16)) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect((upstream.0.as_str(), upstream.1)) else {
                return;
            };
            client.set_nodelay(true).unwrap();
            server.set_nodelay(true).unwrap();
            let (mut c_read, mut s_write) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            let (mut s_read, mut c_write) = (server, client);
            let counter = counter.clone();
            thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = c_read.read(&mut buf) {
                    if n == 0 || s_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            });
            thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = s_read.read(&mut buf) {
                    if n == 0 || c_write.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, count)
}

#[derive(Debug)]
struct SearchPath(String);

impl r2d2::CustomizeConnection<postgres::Client, postgres::Error> for SearchPath {
    fn on_acquire(&self, conn: &mut postgres::Client) -> Result<(), postgres::Error> {
        conn.batch_execute(&format!("SET search_path TO \"{}\"", self.0))
    }
}

#[test]
fn a_warm_single_row_push_costs_four_round_trips() {
    let db = TestDb::new();
    let config: postgres::Config = pg_url().parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(host)) => host.clone(),
        other => panic!("the round-trip test needs a TCP server URL, got {other:?}"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let (proxy_port, count) = proxy((host, port));
    let mut proxied = postgres::Config::new();
    proxied.host("127.0.0.1").port(proxy_port);
    if let Some(user) = config.get_user() {
        proxied.user(user);
    }
    if let Some(dbname) = config.get_dbname() {
        proxied.dbname(dbname);
    }
    if let Some(password) = config.get_password() {
        proxied.password(password);
    }
    // A host-built pool (the `new` constructor): one connection, no
    // validation query on checkout, search_path set on acquire.
    let pool = r2d2::Pool::builder()
        .max_size(1)
        .test_on_check_out(false)
        .connection_customizer(Box::new(SearchPath(db.schema.clone())))
        .build(PostgresConnectionManager::new(proxied, NoTls))
        .unwrap();
    let storage = PostgresStorage::new(pool, db.config());
    let schema = fix1();
    storage
        .ensure_schema(&schema, &EnsureOptions::default())
        .unwrap();
    let single_row_push = |id: &str| {
        let row = task_row(&schema, id, "p1", id, 1);
        let mut tx = storage.begin("acme").unwrap();
        tx.lock_partition_for_push().unwrap();
        let gate = tx.read_serve_gate(1).unwrap();
        assert_eq!(gate.stored_schema_version, 1);
        assert!(tx.get_push_result("c", id).unwrap().is_none());
        tx.upsert_row("tasks", &row, Some(0)).unwrap();
        let seq = tx
            .append_commit(&commit("c", id, vec![upsert_change(&row, "tasks")]))
            .unwrap();
        tx.put_push_result("c", id, &StoredPushResult::applied(seq))
            .unwrap();
        tx.commit().unwrap();
    };
    single_row_push("warm-up");
    let before = count.load(Ordering::SeqCst);
    single_row_push("measured");
    let round_trips = count.load(Ordering::SeqCst) - before;
    assert_eq!(
        round_trips, 4,
        "begin+lock+savepoint+fence+gate, get_push_result, upsert_row, append_commit+put_push_result+commit"
    );
}
