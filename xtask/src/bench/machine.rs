//! The machine description written with every result set: cores, memory,
//! OS, database versions and every setting the workloads ran with.

use std::process::Command;

use serde_json::{json, Value};

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn cpu_model() -> Option<String> {
    read("/proc/cpuinfo")?
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

fn memory_mb() -> Option<u64> {
    read("/proc/meminfo")?
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb / 1024)
}

fn os() -> Option<String> {
    let release = read("/etc/os-release")?;
    release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim_matches('"').to_owned())
}

/// The 1/5/15-minute load averages (the machine is shared: a high load
/// means the absolute figures are pessimistic; the ratios are interleaved).
pub fn load_average() -> Option<String> {
    read("/proc/loadavg").map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

fn rustc() -> Option<String> {
    let out = Command::new("rustc").arg("--version").output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Postgres server version and the settings that bound its write speed.
pub fn postgres(url: &str) -> Value {
    let describe = || -> anyhow::Result<Value> {
        let mut client = postgres::Client::connect(url, postgres::NoTls)?;
        let version: String = client.query_one("SHOW server_version", &[])?.try_get(0)?;
        let rows = client.query(
            "SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings WHERE name = ANY($1) ORDER BY name",
            &[&vec![
                "fsync",
                "synchronous_commit",
                "wal_sync_method",
                "full_page_writes",
                "shared_buffers",
                "work_mem",
                "max_connections",
                "commit_delay",
                "default_transaction_isolation",
            ]],
        )?;
        let mut settings = serde_json::Map::new();
        for row in rows {
            settings.insert(row.try_get(0)?, Value::String(row.try_get(1)?));
        }
        Ok(json!({
            "server_version": version,
            "connection": "TCP loopback, NoTls",
            "settings": settings,
            "pool": "PostgresStorage::connect default pool (16 connections); raw: one connection per client thread",
        }))
    };
    describe().unwrap_or_else(|e| json!({"error": e.to_string()}))
}

/// MariaDB server version and the settings that bound its write speed,
/// commit durability first (`innodb_flush_log_at_trx_commit`,
/// `sync_binlog`): the bench runs with the server's own values.
pub fn mariadb(url: &str) -> Value {
    let describe = || -> anyhow::Result<Value> {
        use mysql::prelude::Queryable;
        let mut conn = super::mariadb_server::server(url)?;
        let version: Option<String> = conn.query_first("SELECT version()")?;
        let rows: Vec<(String, String)> = conn.query(
            "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_VARIABLES \
             WHERE VARIABLE_NAME IN ('INNODB_FLUSH_LOG_AT_TRX_COMMIT', 'SYNC_BINLOG', 'LOG_BIN', \
             'INNODB_DOUBLEWRITE', 'INNODB_FLUSH_METHOD', 'INNODB_BUFFER_POOL_SIZE', \
             'INNODB_LOG_FILE_SIZE', 'TX_ISOLATION', 'MAX_CONNECTIONS', 'BINLOG_FORMAT') \
             ORDER BY VARIABLE_NAME",
        )?;
        let mut settings = serde_json::Map::new();
        for (name, value) in rows {
            settings.insert(name.to_ascii_lowercase(), Value::String(value));
        }
        Ok(json!({
            "server_version": version,
            "connection": "TCP loopback, no TLS",
            "settings": settings,
            "pool": "MariadbStorage default pool (16 connections); raw: one connection per client thread",
        }))
    };
    describe().unwrap_or_else(|e| json!({"error": e.to_string()}))
}

/// The whole description.
pub fn describe(profile: &str, quick: bool, rounds: usize, postgres: Option<Value>) -> Value {
    json!({
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        "cpu": cpu_model(),
        "memory_mb": memory_mb(),
        "os": os(),
        "kernel": read("/proc/sys/kernel/osrelease").map(|s| s.trim().to_owned()),
        "rustc": rustc(),
        "profile": profile,
        "quick": quick,
        "rounds": rounds,
        "load_average_at_start": load_average(),
        "shared_machine": "the cores are shared with other work; ours and raw are interleaved per round, so the ratios are the robust figures",
        "sqlite": {
            "version": rusqlite::version(),
            "settings": {
                "journal_mode": "WAL",
                "synchronous": "FULL (the default; W1 also NORMAL)",
                "busy_timeout_ms": 5000,
                "cache_size": "default (-2000, 2 MB per connection)",
                "foreign_keys": "OFF",
                "storage": "file in a temporary directory; SqliteStorage: 1 writer + up to 8 readers; raw: one connection",
            },
        },
        "postgres": postgres,
    })
}
