//! Inspection never writes: `status`, `checkpoints`, `rows` and `commits`
//! open the database read-only — a reference-written SQLite file stays byte
//! for byte as it was and no file appears next to it, a Postgres role whose
//! transactions are read-only can inspect, a catalog is left as it was, a
//! database without the storage tables is "not a syncstore database (yet)".
//! Also: passwords are never printed, control characters in values never
//! reach the terminal, logs carry no colour codes off a terminal.
//!
//! The fixture folder is `../../../shared/fixtures/reference-0.15` relative
//! to this package, or the folder named by `SYNCSTORE_FIXTURES`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::{pg_url, seed_todos, syncstore, Db};
use sync_core::RowValue;

const DEFAULT_FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/reference-0.15"
);

fn fixtures() -> PathBuf {
    std::env::var_os("SYNCSTORE_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_FIXTURES))
}

/// Every file of a directory with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("read the directory")
        .map(|entry| {
            let path = entry.expect("an entry").path();
            (
                path.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&path).expect("read a file"),
            )
        })
        .collect()
}

const INSPECTIONS: [&[&str]; 5] = [
    &["status", "--json"],
    &["status"],
    &["checkpoints", "--json"],
    &["commits", "--partition", "p1", "--json"],
    &["rows", "--partition", "p1", "--table", "todos", "--json"],
];

#[test]
fn a_reference_sqlite_file_is_inspected_and_left_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("A.sqlite");
    std::fs::copy(fixtures().join("A.sqlite"), &copy).unwrap_or_else(|e| {
        panic!(
            "cannot copy the reference database from {} ({e})",
            fixtures().display()
        )
    });
    let before = snapshot(dir.path());
    let url = format!("sqlite:{}", copy.display());
    let partitions = syncstore(&["--db", &url, "status", "--json"]).ok_json();
    assert!(
        partitions["schema_version"].is_number(),
        "the reference marker is read: {partitions:#}"
    );
    let first = partitions["partitions"][0]["partition"]
        .as_str()
        .expect("a partition")
        .to_owned();
    for args in INSPECTIONS {
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "p1" { first.as_str() } else { a })
            .collect();
        let mut all = vec!["--db", url.as_str()];
        all.extend(args.iter().copied());
        let run = syncstore(&all);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    }
    assert_eq!(
        snapshot(dir.path()),
        before,
        "inspection changed the reference file or created one"
    );
}

#[test]
fn a_read_only_sqlite_file_is_inspected() {
    let db = Db::sqlite();
    let _app = seed_todos(&db, "p1", 3, 3);
    drop(_app);
    let Db::Sqlite { path, dir } = &db else {
        unreachable!()
    };
    let mut permissions = std::fs::metadata(path).unwrap().permissions();
    permissions.set_readonly(true);
    std::fs::set_permissions(path, permissions).unwrap();
    let before = std::fs::read(path).unwrap();
    for args in INSPECTIONS {
        let run = db.run(args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    }
    assert_eq!(std::fs::read(path).unwrap(), before);
    assert!(dir.path().exists());
}

/// A WAL database nobody has open is inspected `immutable`: no `-wal` or
/// `-shm` appears beside it (and none is needed, so a directory the
/// process cannot write works too), the file stays as it was.
#[test]
fn a_closed_wal_database_is_inspected_and_nothing_appears_beside_it() {
    let db = Db::sqlite();
    drop(seed_todos(&db, "p1", 3, 1));
    let Db::Sqlite { dir, .. } = &db else {
        unreachable!()
    };
    let before = snapshot(dir.path());
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        ["test.sqlite"],
        "a closed database has no companion files"
    );
    for args in INSPECTIONS {
        let run = db.run(args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        let after = snapshot(dir.path());
        assert_eq!(
            after.keys().collect::<Vec<_>>(),
            ["test.sqlite"],
            "{args:?} created a file beside the database"
        );
        assert!(after == before, "{args:?} changed the database file");
    }
    let rows = db.json(&["rows", "--partition", "p1", "--table", "todos"]);
    assert_eq!(rows["rows"].as_array().map(Vec::len), Some(3), "{rows:#}");
}

/// The live file renamed away and its process gone: `status` refuses the
/// `-wal` left at the path instead of reporting an empty database there,
/// and says what to do.
#[test]
fn a_stranded_wal_is_reported_by_status_and_nothing_is_created() {
    let db = Db::sqlite();
    let app = seed_todos(&db, "p1", 2, 1);
    let Db::Sqlite { dir, path } = &db else {
        unreachable!()
    };
    std::fs::rename(path, dir.path().join("moved.sqlite")).unwrap();
    // A killed process closes nothing: its -wal and -shm stay at the path.
    std::mem::forget(app);
    let details = db.json_error(&["status"], "sync.storage.stranded_journal");
    assert_eq!(details["path"], path.display().to_string(), "{details:#}");
    assert!(
        details["found"]
            .as_str()
            .is_some_and(|f| f.contains("test.sqlite-wal")),
        "{details:#}"
    );
    let run = db.run(&["status"]);
    run.text_error("sync.storage.stranded_journal");
    assert!(run.stderr.contains("move them back"), "{}", run.stderr);
    assert!(!path.exists(), "no database was created at the path");
}

#[test]
fn a_file_without_the_storage_tables_is_not_a_syncstore_database() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let url = format!("sqlite:{}", empty.display());
    for command in ["status", "checkpoints"] {
        let details = syncstore(&["--db", &url, command, "--json"])
            .json_error("sync.storage.not_a_sync_database");
        assert_eq!(details["reason"], "no_tables");
    }
    let run = syncstore(&["--db", &url, "status"]);
    run.text_error("sync.storage.not_a_sync_database");
    assert!(
        run.stderr.contains("not a syncstore database (yet)"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read(&empty).unwrap(), b"", "left as it was");
}

#[test]
fn a_postgres_schema_without_the_storage_tables_is_not_a_syncstore_database() {
    let db = Db::postgres();
    db.json_error(&["status"], "sync.storage.not_a_sync_database");
    assert_eq!(catalog(&db), Vec::<String>::new(), "nothing was created");
}

/// The relations and triggers of the test schema.
fn catalog(db: &Db) -> Vec<String> {
    let Db::Postgres { server, schema } = db else {
        unreachable!()
    };
    let mut client = postgres::Client::connect(server, postgres::NoTls).unwrap();
    let rows = client
        .query(
            "SELECT c.relname || ':' || c.relkind::text || ':' || \
                    coalesce((SELECT string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ',' ORDER BY a.attnum) \
                              FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') \
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 \
             UNION ALL SELECT 'trigger ' || t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid \
             JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal \
             ORDER BY 1",
            &[schema],
        )
        .unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

#[test]
fn a_reference_postgres_restore_is_left_as_it_was() {
    let db = Db::postgres();
    let Db::Postgres { server, schema } = &db else {
        unreachable!()
    };
    sync_postgres::reference_dump::load_into_schema(
        server,
        schema,
        &fixtures().join("A.postgres.sql"),
    )
    .unwrap_or_else(|e| panic!("cannot restore the reference dump ({e:?})"));
    let before = catalog(&db);
    for args in INSPECTIONS {
        // The outcome may be an error on a pre-RFC 0007 shape; what matters
        // here is that nothing was created or altered.
        let _ = db.run(args);
    }
    assert_eq!(catalog(&db), before, "inspection altered the catalog");
}

#[test]
fn a_read_only_postgres_role_inspects() {
    let db = Db::postgres();
    let _app = seed_todos(&db, "p1", 3, 3);
    drop(_app);
    let Db::Postgres { server, schema } = &db else {
        unreachable!()
    };
    let role = format!("{schema}_ro");
    let mut admin = postgres::Client::connect(server, postgres::NoTls).unwrap();
    admin
        .batch_execute(&format!(
            "CREATE ROLE \"{role}\" LOGIN; \
             ALTER ROLE \"{role}\" SET default_transaction_read_only = on; \
             GRANT USAGE ON SCHEMA \"{schema}\" TO \"{role}\"; \
             GRANT SELECT ON ALL TABLES IN SCHEMA \"{schema}\" TO \"{role}\";"
        ))
        .unwrap();
    let config: postgres::Config = server.parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let dbname = config.get_dbname().unwrap_or("postgres");
    let url = format!("postgres://{role}@{host}:{port}/{dbname}?schema={schema}");
    let before = catalog(&db);
    for args in INSPECTIONS {
        let mut all = vec!["--db", url.as_str()];
        all.extend(args.iter().copied());
        let run = syncstore(&all);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    }
    let status = syncstore(&["--db", &url, "status", "--json"]).ok_json();
    assert_eq!(status["partitions"][0]["max_commit_seq"], 1);
    assert_eq!(catalog(&db), before);
    admin
        .batch_execute(&format!(
            "REVOKE ALL ON ALL TABLES IN SCHEMA \"{schema}\" FROM \"{role}\"; \
             REVOKE ALL ON SCHEMA \"{schema}\" FROM \"{role}\"; DROP ROLE \"{role}\";"
        ))
        .unwrap();
}

#[test]
fn passwords_are_never_printed() {
    let db = Db::postgres();
    let _app = seed_todos(&db, "p1", 2, 2);
    drop(_app);
    let Db::Postgres { server, schema } = &db else {
        unreachable!()
    };
    // The local server trusts the connection, so any password is accepted.
    let with_password = server.replacen("://postgres@", "://postgres:hunter2@", 1);
    assert_ne!(&with_password, server, "the test URL names user postgres");
    let separator = if server.contains('?') { '&' } else { '?' };
    let urls = [
        format!("{with_password}{separator}schema={schema}"),
        format!("{server}{separator}schema={schema}&password=hunter2"),
    ];
    for url in &urls {
        for args in [
            vec!["-vv", "status"],
            vec!["-vv", "status", "--json"],
            vec!["-vv", "checkpoints"],
        ] {
            let mut all = vec!["--db", url.as_str()];
            all.extend(args.iter().copied());
            let run = syncstore(&all);
            assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
            assert!(
                !run.stdout.contains("hunter2") && !run.stderr.contains("hunter2"),
                "{args:?} printed the password:\n{}\n{}",
                run.stdout,
                run.stderr
            );
        }
    }
    // An error naming the server (nothing listens on port 1).
    let refused = "postgres://postgres:hunter2@127.0.0.1:1/test?password=hunter2";
    for json in [false, true] {
        let mut args = vec!["--db", refused, "-vv", "status"];
        if json {
            args.push("--json");
        }
        let run = syncstore(&args);
        assert_eq!(run.code, 1);
        assert!(
            !run.stdout.contains("hunter2") && !run.stderr.contains("hunter2"),
            "{}\n{}",
            run.stdout,
            run.stderr
        );
    }
    // The demo on a password URL, text and JSON.
    for json in [false, true] {
        let mut args = vec!["--db", urls[0].as_str(), "demo", "--rows", "30"];
        if json {
            args.push("--json");
        }
        let demo_db = format!(
            "{with_password}{separator}schema={schema}_demo{}",
            json as u8
        );
        args[1] = demo_db.as_str();
        let run = syncstore(&args);
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            !run.stdout.contains("hunter2") && !run.stderr.contains("hunter2"),
            "{}\n{}",
            run.stdout,
            run.stderr
        );
        let mut admin = postgres::Client::connect(server, postgres::NoTls).unwrap();
        admin
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{schema}_demo{}\" CASCADE",
                json as u8
            ))
            .unwrap();
    }
    assert!(!pg_url().is_empty());
}

/// Passwords holding what ends a URL part elsewhere (`/ ? # :`, a space,
/// a quote) — as the driver accepts them raw in the userinfo, or
/// percent-encoded there or in `?password=` — are never printed, in text,
/// JSON, verbose logs, errors or the demo.
#[test]
fn passwords_with_url_delimiters_are_never_printed() {
    let db = Db::postgres();
    drop(seed_todos(&db, "p1", 2, 2));
    let Db::Postgres { server, schema } = &db else {
        unreachable!()
    };
    assert!(!server.contains('?'), "the test URL has no query: {server}");
    let raw = "s3/cr#t pa?ss:w'd";
    let encoded = "b64%2Bx%2F%40y%3D%3D";
    let decoded = "b64+x/@y==";
    // The local server trusts the connection, so any password is accepted.
    let with =
        |password: &str| server.replacen("://postgres@", &format!("://postgres:{password}@"), 1);
    let urls = [
        format!("{}?schema={schema}", with(raw)),
        format!("{}?schema={schema}", with(encoded)),
        format!("{server}?schema={schema}&password={encoded}"),
    ];
    let secrets = [raw, encoded, decoded, "cr#t pa", "x/@y"];
    let assert_hidden = |what: &str, run: &common::Run| {
        for secret in secrets {
            assert!(
                !run.stdout.contains(secret) && !run.stderr.contains(secret),
                "{what} printed {secret:?}:\n{}\n{}",
                run.stdout,
                run.stderr
            );
        }
    };
    for url in &urls {
        for args in [
            vec!["-vv", "status"],
            vec!["-vv", "status", "--json"],
            vec!["rows", "--partition", "p1", "--table", "todos"],
        ] {
            let mut all = vec!["--db", url.as_str()];
            all.extend(args.iter().copied());
            let run = syncstore(&all);
            assert_eq!(run.code, 0, "{url} {args:?}: {}", run.stderr);
            assert_hidden(&format!("{args:?}"), &run);
        }
        let status = syncstore(&["--db", url, "status"]);
        assert!(
            status.stdout.contains("postgres:***@") || status.stdout.contains("password=***"),
            "{}",
            status.stdout
        );
    }
    // Errors naming the server (nothing listens on port 1).
    for password in [raw, encoded] {
        let refused = format!("postgres://postgres:{password}@127.0.0.1:1/test?password={encoded}");
        for json in [false, true] {
            let mut args = vec!["--db", refused.as_str(), "-vv", "status"];
            if json {
                args.push("--json");
            }
            let run = syncstore(&args);
            assert_eq!(run.code, 1, "{}", run.stderr);
            assert_hidden("an unreachable server", &run);
        }
    }
    // The demo, text and JSON, which prints the URL that opens it again.
    for json in [false, true] {
        let demo_schema = format!("{schema}_demo{}", json as u8);
        let demo_db = format!("{}?schema={demo_schema}", with(raw));
        let mut args = vec!["--db", demo_db.as_str(), "demo", "--rows", "30"];
        if json {
            args.push("--json");
        }
        let run = syncstore(&args);
        let mut admin = postgres::Client::connect(server, postgres::NoTls).unwrap();
        admin
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{demo_schema}\" CASCADE"))
            .unwrap();
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_hidden("the demo", &run);
    }
}

#[test]
fn values_cannot_drive_the_terminal_or_fake_a_line() {
    let db = Db::sqlite();
    let partition = "ev\u{1b}]0;owned\u{7}il\r\nerror: fake";
    let _app = seed_todos(&db, partition, 2, 2);
    drop(_app);
    for args in [
        vec!["status"],
        vec!["checkpoints"],
        vec!["commits", "--partition", partition],
        vec!["-v", "prune", "--partition", partition, "--through", "1"],
    ] {
        let run = db.run(&args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
        for output in [&run.stdout, &run.stderr] {
            assert!(
                !output.contains('\u{1b}') && !output.contains('\r') && !output.contains('\u{7}'),
                "{args:?}: a control character reached the output: {output:?}"
            );
            assert!(
                !output.lines().any(|l| l.starts_with("error: fake")),
                "{args:?}: a value faked a line: {output:?}"
            );
        }
    }
    let run = db.run(&["rows", "--partition", "nobody", "--table", "todos"]);
    run.text_error("sync.cli.unknown_partition");
}

/// Bidi overrides, line separators and C1 controls in partitions, row ids
/// and payload text reach neither text nor JSON output raw; in text a
/// value with spaces or separators is quoted, so it cannot pass for the
/// fields after it; JSON still reads back as the stored values.
#[test]
fn bidi_separators_and_c1_controls_are_escaped_in_text_and_json() {
    let db = Db::sqlite();
    let partition = "p\u{202e}1: max_commit_seq 99, horizon 0";
    let row_id = "t\u{9b}31m\u{2028}x";
    let title = "gnp.\u{202e}exe \u{2066}\u{85}\u{2029}";
    let mut app = common::App::start(&db, &common::todos_schema(1, false, ""), partition);
    app.push(
        partition,
        "todos",
        &[vec![
            RowValue::String(row_id.to_owned()),
            RowValue::String("list 1, done".to_owned()),
            RowValue::String(title.to_owned()),
            RowValue::Boolean(true),
        ]],
        &[],
    );
    drop(app);
    let raw = [
        '\u{202e}', '\u{2066}', '\u{2028}', '\u{2029}', '\u{9b}', '\u{85}',
    ];
    let assert_inert = |what: &str, run: &common::Run| {
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        for output in [&run.stdout, &run.stderr] {
            assert!(
                !output.contains(&raw[..]),
                "{what}: a control reached the output raw: {output:?}"
            );
        }
    };
    let rows = ["rows", "--partition", partition, "--table", "todos"];
    let commits = ["commits", "--partition", partition];
    for args in [
        &["status"][..],
        &rows[..],
        &commits[..],
        &["checkpoints"][..],
    ] {
        let run = db.run(args);
        assert_inert(&format!("{args:?}"), &run);
        let mut json = args.to_vec();
        json.push("--json");
        assert_inert(&format!("{json:?}"), &db.run(&json));
    }
    let status = db.run(&["status"]).stdout;
    assert!(
        status
            .contains("partition \"p\\u{202e}1: max_commit_seq 99, horizon 0\": max_commit_seq 1,"),
        "the partition is one quoted field: {status}"
    );
    let listed = db.json(&rows);
    assert_eq!(listed["rows"][0]["row_id"], row_id);
    assert_eq!(listed["rows"][0]["values"]["title"], title);
    let text = db.run(&commits).stdout;
    assert!(text.contains("\"t\\u{9b}31m\\u{2028}x\""), "{text}");
    let json = db.run(&[&commits[..], &["--json"]].concat()).stdout;
    assert!(json.contains("t\\u009b31m\\u2028x"), "{json}");
}

#[test]
fn verbose_logs_off_a_terminal_carry_no_colour_and_show_progress() {
    let db = Db::sqlite();
    let _app = seed_todos(&db, "acme", 30, 3);
    drop(_app);
    let dir = db.scratch();
    let v2 = common::write_file(&dir, "v2.json", &common::todos_schema(2, true, ""));
    db.json(&["migrate", "--schema", &v2, "--declare", "acme:search_v2"]);
    let run = db.run(&[
        "-v",
        "backfill",
        "--partition",
        "acme",
        "--name",
        "search_v2",
        "--schema",
        &v2,
        "--projector",
        "derived-column",
        "--table",
        "todos",
        "--column",
        "search_text",
        "--from",
        "title",
        "--batch-size",
        "5",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stderr.contains('\u{1b}'),
        "colour codes in: {}",
        run.stderr
    );
    assert!(
        run.stderr.contains("backfill acme:search_v2: ") && run.stderr.contains("/30 rows ("),
        "a progress line with the total: {}",
        run.stderr
    );
    let run = db.run(&["-v", "prune", "--partition", "acme", "--through", "10"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stderr.contains("prune acme: "), "{}", run.stderr);
}
