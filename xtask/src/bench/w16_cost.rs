//! W16 cost per push: what one single-row push (W1's commits, one push per
//! transaction, gate on; ours through the prelude, as the engine pushes)
//! costs, for ours and the raw client on fresh databases, interleaved per
//! round:
//!
//! - **CPU µs per push of this process**: the CPU time of every thread of
//!   the process (`/proc/self/task/*/schedstat`, nanoseconds) across the
//!   measured pushes, divided by the pushes;
//! - **Postgres: server CPU µs per push**: the same for the server
//!   backends serving this process's connections (found by their client
//!   ports in `pg_stat_activity`, read from `/proc/<pid>/schedstat`; the
//!   server must run on this machine);
//! - **log bytes per push**: SQLite, the growth of the WAL file while a
//!   reader holds the snapshot of the start (no checkpoint can reset the
//!   log; the file is truncated first); Postgres, the bytes of the WAL
//!   records of this database's relations and of the transactions that
//!   wrote them (`pg_walinspect`, so other sessions of a shared server do
//!   not count), or, without that extension, the `pg_current_wal_lsn()`
//!   difference (every session's);
//! - **Postgres: statements and round trips per push**, counted by the
//!   loopback proxy (`proxy.rs`) in a second pass: every `Execute` or
//!   simple `Query` message is a statement, every `Sync` or `Query` a
//!   round trip.

use std::collections::BTreeSet;
use std::fs;

use anyhow::{bail, Context, Result};
use sync_sqlite::Synchronous;

use super::db::{Db, Dialect, Env, Location};
use super::proxy::{upstream, Proxy};
use super::pushes::{run_ours_prelude, run_raw, Prepared};
use super::raw::RawClient;
use super::report::{Better, Measure, Sample};
use super::w1_push::{self, PARTITION};
use super::{progress, Scale};

/// Pushes before each measured pass (statements prepared, pages cached).
const WARM_UP: usize = 50;

/// One implementation's costs of one round.
#[derive(Debug, Default, Clone, Copy)]
struct Cost {
    cpu_us: f64,
    server_cpu_us: Option<f64>,
    log_bytes: f64,
    statements: Option<f64>,
    round_trips: Option<f64>,
}

/// Who pushes: the storage API or the raw client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    Ours,
    Raw,
}

/// The commits of one pass: a warm-up and the measured ones.
struct Pass {
    warm: Prepared,
    measured: Prepared,
}

fn pass(count: usize, tag: &str) -> Result<Pass> {
    let all = w1_push::commits(WARM_UP + count, tag)?;
    let (warm, measured) = all.split_at(WARM_UP);
    Ok(Pass {
        warm: Prepared::new(warm.to_vec()),
        measured: Prepared::new(measured.to_vec()),
    })
}

/// Pushes measured per pass.
fn pushes(scale: &Scale) -> usize {
    if scale.quick {
        300
    } else {
        2_000
    }
}

/// W16 for one dialect.
pub fn run(env: &Env, scale: &Scale) -> Result<Vec<Measure>> {
    let n = pushes(scale);
    let mut rounds: Vec<(Cost, Cost)> = Vec::new();
    for round in 0..scale.rounds {
        let tag = format!("w16r{round}");
        let (ours, raw) = if round % 2 == 0 {
            let ours = measure(env, Who::Ours, n, &tag)?;
            (ours, measure(env, Who::Raw, n, &tag)?)
        } else {
            let raw = measure(env, Who::Raw, n, &tag)?;
            (measure(env, Who::Ours, n, &tag)?, raw)
        };
        progress(
            env.dialect,
            &format!("W16 round {}/{}", round + 1, scale.rounds),
            &format!(
                "CPU ours {:.0} raw {:.0} µs/push; server {:?} / {:?}; log ours {:.0} raw {:.0} B/push; \
                 statements {:?} / {:?}",
                ours.cpu_us,
                raw.cpu_us,
                ours.server_cpu_us.map(|v| v.round()),
                raw.server_cpu_us.map(|v| v.round()),
                ours.log_bytes,
                raw.log_bytes,
                ours.statements,
                raw.statements
            ),
        );
        rounds.push((ours, raw));
    }
    let d = env.dialect;
    let row = |variant: &str, unit: &'static str, f: &dyn Fn(&Cost) -> Option<f64>| {
        let samples: Vec<Sample> = rounds
            .iter()
            .filter_map(|(o, r)| {
                Some(Sample {
                    ours: f(o)?,
                    raw: f(r),
                })
            })
            .collect();
        (!samples.is_empty())
            .then(|| Measure::from_samples("W16", variant, d, unit, Better::Lower, samples))
    };
    let mut out: Vec<Measure> = [
        row("CPU/push (client process)", "µs", &|c| Some(c.cpu_us)),
        row("CPU/push (server)", "µs", &|c| c.server_cpu_us),
        row("WAL bytes/push", "B", &|c| Some(c.log_bytes)),
        row("statements/push", "count", &|c| c.statements),
        row("round trips/push", "count", &|c| c.round_trips),
    ]
    .into_iter()
    .flatten()
    .collect();
    if d == Dialect::Sqlite {
        out.extend(run_grouped(env, scale, n)?);
    }
    Ok(out)
}

/// The grouped pass on SQLite ([`w16_grouped`](super::w16_grouped)), interleaved per round.
fn run_grouped(env: &Env, scale: &Scale, n: usize) -> Result<Vec<Measure>> {
    use super::w16_grouped::describe;
    use super::w16_grouped::{measure, Grouped, GroupedCost, GROUP};
    let mut rounds: Vec<(GroupedCost, GroupedCost)> = Vec::new();
    for round in 0..scale.rounds {
        let tag = format!("w16g{round}");
        let (ours, raw) = if round % 2 == 0 {
            let ours = measure(env, Grouped::Ours, n, &format!("{tag}o"))?;
            (ours, measure(env, Grouped::Raw, n, &format!("{tag}r"))?)
        } else {
            let raw = measure(env, Grouped::Raw, n, &format!("{tag}r"))?;
            (measure(env, Grouped::Ours, n, &format!("{tag}o"))?, raw)
        };
        progress(
            env.dialect,
            &format!("W16 grouped round {}/{}", round + 1, scale.rounds),
            &format!(
                "{GROUP} threads: CPU ours {:.0} raw {:.0} µs/push; WAL ours {:.0} raw {:.0} B/push; \
                 pushes per COMMIT ours {:.1} raw {:.1}",
                ours.cpu_us,
                raw.cpu_us,
                ours.log_bytes,
                raw.log_bytes,
                ours.pushes_per_commit,
                raw.pushes_per_commit
            ),
        );
        progress(
            env.dialect,
            "W16 grouped log frames per push",
            &format!(
                "ours: {}; raw: {}",
                describe(&ours.frames_by_btree),
                describe(&raw.frames_by_btree)
            ),
        );
        rounds.push((ours, raw));
    }
    let row =
        |variant: String, unit: &'static str, better: Better, f: &dyn Fn(&GroupedCost) -> f64| {
            let samples = rounds
                .iter()
                .map(|(o, r)| Sample {
                    ours: f(o),
                    raw: Some(f(r)),
                })
                .collect();
            Measure::from_samples("W16", variant, env.dialect, unit, better, samples)
        };
    Ok(vec![
        row(
            format!("CPU/push, {GROUP} per COMMIT"),
            "µs",
            Better::Lower,
            &|c| c.cpu_us,
        ),
        row(
            format!("WAL bytes/push, {GROUP} per COMMIT"),
            "B",
            Better::Lower,
            &|c| c.log_bytes,
        ),
        row(
            format!("pushes per COMMIT, {GROUP} threads"),
            "count",
            Better::NoRatio,
            &|c| c.pushes_per_commit,
        ),
    ])
}

/// One implementation's costs on fresh databases.
fn measure(env: &Env, who: Who, n: usize, tag: &str) -> Result<Cost> {
    let tag = match who {
        Who::Ours => format!("{tag}o"),
        Who::Raw => format!("{tag}r"),
    };
    match env.dialect {
        Dialect::Sqlite => measure_sqlite(env, who, n, &tag),
        Dialect::Postgres => measure_postgres(env, who, n, &tag),
        Dialect::Mariadb => bail!("W16 is not built on MariaDB"),
    }
}

/// The measured pushes of a pass, as [`push_pass`] hands them to its caller.
type Pushes<'a> = dyn FnMut() -> Result<()> + 'a;

/// Runs `pass` through `who` on `db`: the warm-up, then `around` wraps the
/// measured pushes.
fn push_pass(
    db: &Db,
    url: Option<&str>,
    who: Who,
    pass: &Pass,
    around: &mut dyn FnMut(&mut Pushes<'_>) -> Result<()>,
) -> Result<()> {
    match who {
        Who::Ours => {
            let storage = match url {
                Some(url) => db.storage_via(url)?,
                None => db.storage(false)?,
            };
            run_ours_prelude(storage.as_ref(), PARTITION, &pass.warm, true)?;
            around(&mut || {
                run_ours_prelude(storage.as_ref(), PARTITION, &pass.measured, true).map(drop)
            })
        }
        Who::Raw => {
            drop(db.storage(false)?);
            let mut raw: Box<dyn RawClient> = match url {
                Some(url) => db.raw_via(url)?,
                None => db.raw()?,
            };
            run_raw(raw.as_mut(), PARTITION, &pass.warm, true)?;
            around(&mut || run_raw(raw.as_mut(), PARTITION, &pass.measured, true).map(drop))
        }
    }
}

fn measure_sqlite(env: &Env, who: Who, n: usize, tag: &str) -> Result<Cost> {
    let per = n as f64;
    // CPU: a plain pass.
    let db = env.fresh(Synchronous::default())?;
    let mut cpu = 0.0;
    push_pass(&db, None, who, &pass(n, &format!("{tag}c"))?, &mut |push| {
        let before = process_cpu_ns()?;
        push()?;
        cpu = (process_cpu_ns()? - before) as f64 / 1e3 / per;
        Ok(())
    })?;
    drop(db);
    // Log: the WAL held open by a reader of the starting snapshot.
    let db = env.fresh(Synchronous::default())?;
    let Location::Sqlite(path) = &db.location else {
        bail!("W16 SQLite pass without a file");
    };
    let wal = super::w16_grouped::wal_path(path);
    let mut log_bytes = 0.0;
    push_pass(&db, None, who, &pass(n, &format!("{tag}w"))?, &mut |push| {
        let reader = super::w16_grouped::hold_wal(path)?;
        let before = wal_size(&wal)?;
        push()?;
        log_bytes = (wal_size(&wal)? - before) as f64 / per;
        reader.execute_batch("COMMIT")?;
        Ok(())
    })?;
    Ok(Cost {
        cpu_us: cpu,
        log_bytes,
        ..Cost::default()
    })
}

fn wal_size(path: &std::path::Path) -> Result<u64> {
    match fs::metadata(path) {
        Ok(meta) => Ok(meta.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e).with_context(|| format!("reading the size of {path:?}")),
    }
}

fn measure_postgres(env: &Env, who: Who, n: usize, tag: &str) -> Result<Cost> {
    let per = n as f64;
    let db = env.fresh(Synchronous::default())?;
    let Location::Postgres { url, schema } = &db.location else {
        bail!("W16 Postgres pass without a server");
    };
    let mut monitor = postgres::Client::connect(url, postgres::NoTls)?;
    // On Citus the shards' log is the workers': the coordinator's shows
    // none of it, and functions created in a distributed schema run on a
    // worker, against another log than the coordinator's positions.
    let walinspect = if env.on_citus() {
        None
    } else {
        walinspect_schema(&mut monitor, schema)
    };
    progress(
        env.dialect,
        "W16 WAL bytes",
        if env.on_citus() {
            "the coordinator's pg_current_wal_lsn() difference (the shards' log is the workers')"
        } else if walinspect.is_some() {
            "records of this schema's relations and transactions (pg_walinspect)"
        } else {
            "pg_current_wal_lsn() difference (every session's; pg_walinspect unavailable)"
        },
    );
    let mut cost = Cost::default();
    push_pass(&db, None, who, &pass(n, &format!("{tag}c"))?, &mut |push| {
        let backends = our_backends(&mut monitor)?;
        let relations = relfilenodes(&mut monitor, schema)?;
        let lsn_before: String = monitor
            .query_one("SELECT pg_current_wal_lsn()::text", &[])?
            .get(0);
        let server_before = backends_cpu_ns(&backends)?;
        let before = process_cpu_ns()?;
        push()?;
        let cpu = process_cpu_ns()? - before;
        let server = backends_cpu_ns(&backends)? - server_before;
        let lsn_after: String = monitor
            .query_one("SELECT pg_current_wal_flush_lsn()::text", &[])?
            .get(0);
        cost.cpu_us = cpu as f64 / 1e3 / per;
        cost.server_cpu_us = Some(server as f64 / 1e3 / per);
        cost.log_bytes = match &walinspect {
            Some(ext) => {
                wal_bytes_of(&mut monitor, ext, &lsn_before, &lsn_after, &relations)? as f64 / per
            }
            None => {
                let diff: i64 = monitor
                    .query_one(
                        "SELECT pg_wal_lsn_diff($2::text::pg_lsn, $1::text::pg_lsn)::int8",
                        &[&lsn_before, &lsn_after],
                    )?
                    .get(0);
                diff as f64 / per
            }
        };
        Ok(())
    })?;
    drop(monitor);
    drop(db);
    // Statements and round trips through the counting proxy.
    let proxy = Proxy::start(upstream(env.pg_url())?)?;
    let proxied = proxy.url(env.pg_url())?;
    let db = env.fresh(Synchronous::default())?;
    push_pass(
        &db,
        Some(&proxied),
        who,
        &pass(n.min(500), &format!("{tag}s"))?,
        &mut |push| {
            proxy.reset();
            push()?;
            Ok(())
        },
    )?;
    let counted = n.min(500) as f64;
    cost.statements = Some(proxy.statements() as f64 / counted);
    cost.round_trips = Some(proxy.round_trips() as f64 / counted);
    Ok(cost)
}

/// CPU time of the calling thread, in nanoseconds.
pub(super) fn thread_cpu_ns() -> Result<u64> {
    let path = "/proc/thread-self/schedstat";
    first_number(&fs::read_to_string(path).with_context(|| format!("reading {path}"))?)
}

/// CPU time of every live thread of this process, in nanoseconds.
pub(super) fn process_cpu_ns() -> Result<u64> {
    let mut total = 0u64;
    for task in fs::read_dir("/proc/self/task").context("listing /proc/self/task")? {
        let path = task?.path().join("schedstat");
        // A thread may end between the listing and the read.
        if let Ok(text) = fs::read_to_string(&path) {
            total += first_number(&text)?;
        }
    }
    Ok(total)
}

/// CPU time of the given server processes, in nanoseconds.
fn backends_cpu_ns(pids: &[i32]) -> Result<u64> {
    let mut total = 0u64;
    for pid in pids {
        let path = format!("/proc/{pid}/schedstat");
        let text = fs::read_to_string(&path).with_context(|| {
            format!("reading {path} (W16 needs the Postgres server on this machine)")
        })?;
        total += first_number(&text)?;
    }
    Ok(total)
}

fn first_number(text: &str) -> Result<u64> {
    text.split_whitespace()
        .next()
        .context("an empty schedstat")?
        .parse()
        .context("a schedstat that is not a number")
}

/// The local TCP ports of this process's sockets.
fn own_ports() -> Result<BTreeSet<i32>> {
    let mut inodes = BTreeSet::new();
    for fd in fs::read_dir("/proc/self/fd").context("listing /proc/self/fd")? {
        let Ok(target) = fs::read_link(fd?.path()) else {
            continue;
        };
        let target = target.to_string_lossy().into_owned();
        if let Some(inode) = target
            .strip_prefix("socket:[")
            .and_then(|t| t.strip_suffix(']'))
        {
            inodes.insert(inode.to_owned());
        }
    }
    let mut ports = BTreeSet::new();
    for table in ["/proc/self/net/tcp", "/proc/self/net/tcp6"] {
        let Ok(text) = fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(inode)) = (fields.get(1), fields.get(9)) else {
                continue;
            };
            if !inodes.contains(*inode) {
                continue;
            }
            if let Some(port) = local.rsplit(':').next() {
                ports.insert(i32::from_str_radix(port, 16)?);
            }
        }
    }
    Ok(ports)
}

/// The server processes of this process's connections, but the monitor's.
fn our_backends(monitor: &mut postgres::Client) -> Result<Vec<i32>> {
    let ports: Vec<i32> = own_ports()?.into_iter().collect();
    let rows = monitor.query(
        "SELECT pid FROM pg_stat_activity WHERE client_port = ANY($1) AND pid <> pg_backend_pid()",
        &[&ports],
    )?;
    let pids: Vec<i32> = rows.iter().map(|r| r.get(0)).collect();
    if pids.is_empty() {
        bail!("W16: no server process of this process's connections found");
    }
    Ok(pids)
}

/// The schema of `pg_walinspect`, created in `schema` (dropped with it)
/// when the database does not have it; `None` when it cannot be had.
fn walinspect_schema(monitor: &mut postgres::Client, schema: &str) -> Option<String> {
    let ident = format!("\"{}\"", schema.replace('"', "\"\""));
    let _ = monitor.batch_execute(&format!(
        "CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA {ident}"
    ));
    monitor
        .query_opt(
            "SELECT n.nspname::text FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace \
             WHERE e.extname = 'pg_walinspect'",
            &[],
        )
        .ok()
        .flatten()
        .map(|r| format!("\"{}\"", r.get::<_, String>(0).replace('"', "\"\"")))
}

/// The file nodes of every relation of `schema`, with their TOAST tables
/// and indexes.
fn relfilenodes(monitor: &mut postgres::Client, schema: &str) -> Result<Vec<i64>> {
    let rows = monitor.query(
        "WITH own AS (SELECT c.oid, c.reltoastrelid FROM pg_class c \
           JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1), \
         rels AS (SELECT oid FROM own UNION SELECT reltoastrelid FROM own WHERE reltoastrelid <> 0 \
           UNION SELECT i.indexrelid FROM pg_index i JOIN own ON i.indrelid = own.reltoastrelid) \
         SELECT pg_relation_filenode(oid)::int8 FROM rels WHERE pg_relation_filenode(oid) IS NOT NULL",
        &[&schema],
    )?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Bytes of the WAL records between two positions that touch `relations`
/// or belong to a transaction that did.
fn wal_bytes_of(
    monitor: &mut postgres::Client,
    ext: &str,
    from: &str,
    to: &str,
    relations: &[i64],
) -> Result<i64> {
    let sql = format!(
        "WITH r AS (SELECT start_lsn, xid, record_length, block_ref \
           FROM {ext}.pg_get_wal_records_info($1::text::pg_lsn, $2::text::pg_lsn)), \
         touching AS (SELECT DISTINCT r.start_lsn, r.xid FROM r, \
           regexp_matches(coalesce(r.block_ref, ''), 'rel [0-9]+/[0-9]+/([0-9]+)', 'g') AS m \
           WHERE m[1]::int8 = ANY($3)), \
         xids AS (SELECT DISTINCT xid FROM touching WHERE xid <> '0'::xid) \
         SELECT coalesce(sum(record_length), 0)::int8 FROM r \
         WHERE r.start_lsn IN (SELECT start_lsn FROM touching) \
            OR r.xid IN (SELECT xid FROM xids)"
    );
    Ok(monitor.query_one(&sql, &[&from, &to, &relations])?.get(0))
}
