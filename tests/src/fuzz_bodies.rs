//! The bodies of the hostile-input fuzz targets, as plain functions of the
//! input bytes. Two drivers call them: the cargo-fuzz targets in `fuzz/`
//! (libFuzzer, nightly toolchain; they include this file by path) and the
//! stable random-bytes driver of `tests/tests/hostile_fuzz.rs`, which runs a
//! bounded number of executions in the normal test suite.
//!
//! Each body feeds the input to one parser of the storage layer and asserts
//! its contract: the result is `Ok` or an error with the code that parser
//! owns — never a panic — and whatever is accepted round-trips. A violated
//! property panics, which both drivers report as a finding.
//!
//! This file uses only `sync_core`, `sync_schema`, `sync_ssp2` and
//! `serde_json`, the dependencies of the fuzz crate.

use sync_core::codec::{self, ColumnShape};
use sync_core::{ColumnType, ErrorCode, SqlValue, StoredPushResult};

/// What a body did with its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// The input was accepted (and round-tripped).
    Accepted,
    /// The input was refused with the parser's own coded error.
    Refused,
}

/// The six targets, by name (also the cargo-fuzz target names).
pub const TARGETS: [&str; 6] = [
    "schema_compile",
    "layouts",
    "codec_roundtrip",
    "push_result_json",
    "prepare_query",
    "ssp2_decode",
];

/// Runs the body of `target` on `data`.
pub fn run(target: &str, data: &[u8]) -> Verdict {
    match target {
        "schema_compile" => schema_compile(data),
        "layouts" => layouts(data),
        "codec_roundtrip" => codec_roundtrip(data),
        "push_result_json" => push_result_json(data),
        "prepare_query" => prepare_query(data),
        "ssp2_decode" => ssp2_decode(data),
        other => panic!("unknown fuzz target {other}"),
    }
}

fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// Schema JSON → `parse_schema_json` → `compile`: refusals are `schema.*`;
/// an accepted schema compiles deterministically, its layouts JSON parses
/// back to the same layouts, and its DDL quotes every identifier.
pub fn schema_compile(data: &[u8]) -> Verdict {
    let text = text(data);
    let input = match sync_schema::parse_schema_json(&text) {
        Ok(input) => input,
        Err(e) => {
            assert_eq!(
                e.code(),
                ErrorCode::SchemaMalformedInput,
                "parse refused with {e:?}"
            );
            return Verdict::Refused;
        }
    };
    let schema = match sync_schema::compile(&input) {
        Ok(schema) => schema,
        Err(e) => {
            assert!(
                e.code().is_schema_compile(),
                "compile refused with a non-schema code: {e:?}"
            );
            return Verdict::Refused;
        }
    };
    let again = sync_schema::compile(&input).expect("compile is deterministic");
    assert_eq!(again, schema, "compile is deterministic");
    let layouts = sync_schema::layouts_json(&schema);
    let parsed = sync_schema::parse_layouts(Some(&layouts)).expect("own layouts parse");
    assert_eq!(
        parsed,
        sync_schema::StoredLayouts::from_schema(&schema),
        "layouts round trip"
    );
    for table in &schema.tables {
        assert!(
            sync_schema::identifier_failure(&table.name).is_none(),
            "compiled table name {:?} is not a valid identifier",
            table.name
        );
        for dialect in [sync_sqlite::DIALECT, sync_postgres::DIALECT] {
            let ddl = sync_schema::create_table_sql(table, dialect);
            assert!(
                ddl.contains(&sync_schema::quote_ident(&table.name)),
                "DDL does not quote {:?}: {ddl}",
                table.name
            );
            for column in &table.columns {
                assert!(
                    ddl.contains(&sync_schema::quote_ident(&column.name)),
                    "DDL does not quote column {:?}: {ddl}",
                    column.name
                );
            }
        }
    }
    Verdict::Accepted
}

/// Layouts text → `parse_layouts`: refusals are `layouts_corrupt`; accepted
/// layouts serialize and parse back to themselves.
pub fn layouts(data: &[u8]) -> Verdict {
    let text = text(data);
    match sync_schema::parse_layouts(Some(&text)) {
        Ok(layouts) => {
            let again = sync_schema::parse_layouts(Some(&layouts.to_json_text()))
                .expect("serialized layouts parse");
            assert_eq!(again, layouts, "layouts round trip");
            Verdict::Accepted
        }
        Err(e) => {
            assert_eq!(
                e.code(),
                ErrorCode::LayoutsCorrupt,
                "layouts refused with {e:?}"
            );
            Verdict::Refused
        }
    }
}

const DECODE_REASONS: [&str; 10] = [
    "truncated",
    "trailing_bytes",
    "nonzero_padding",
    "null_in_non_nullable",
    "invalid_boolean",
    "invalid_utf8",
    "invalid_json",
    "invalid_blob_ref",
    "integer_out_of_range",
    "unknown_column_type",
];

/// The first byte picks a column count, the next bytes the column shapes,
/// the rest is the payload. Decoding refuses with `decode_failed` and a
/// known reason and column position; an accepted payload re-encodes to the
/// same bytes (the codec is canonical) and validates.
pub fn codec_roundtrip(data: &[u8]) -> Verdict {
    let Some((&count, rest)) = data.split_first() else {
        return Verdict::Refused;
    };
    let n = usize::from(count % 20).min(rest.len());
    let (shape_bytes, payload) = rest.split_at(n);
    let columns: Vec<ColumnShape> = shape_bytes
        .iter()
        .map(|b| ColumnShape::new(ColumnType::ALL[usize::from(b % 8)], b & 0x80 != 0))
        .collect();
    match codec::decode(&columns, payload) {
        Ok(values) => {
            assert_eq!(values.len(), columns.len(), "one value per column");
            let encoded = codec::encode(&columns, &values).expect("decoded values encode");
            assert_eq!(encoded, payload, "the codec is canonical");
            codec::validate(&columns, payload).expect("a decodable payload validates");
            Verdict::Accepted
        }
        Err(e) => {
            assert_eq!(
                e.code(),
                ErrorCode::CodecDecodeFailed,
                "decode refused with {e:?}"
            );
            let reason = e.get_detail("reason").unwrap_or_default();
            assert!(
                DECODE_REASONS.contains(&reason),
                "unknown reason {reason:?}"
            );
            let column: usize = e
                .get_detail("column")
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("decode error without a column position: {e:?}"));
            // A padding error names the offending bitmap bit, the others a
            // column (or the end of the row for trailing bytes).
            let bound = if reason == "nonzero_padding" {
                columns.len().div_ceil(8) * 8
            } else {
                columns.len() + 1
            };
            assert!(
                column < bound,
                "{reason}: column position {column} of {}",
                columns.len()
            );
            assert!(
                codec::validate(&columns, payload).is_err(),
                "validate agrees with decode"
            );
            Verdict::Refused
        }
    }
}

/// Push-result JSON → `StoredPushResult::from_json`: refusals are
/// `idempotency_cache_miss`; an accepted record serializes to JSON that
/// parses back to the same record, and serializing is idempotent.
pub fn push_result_json(data: &[u8]) -> Verdict {
    let text = text(data);
    match StoredPushResult::from_json(&text) {
        Ok(result) => {
            let json = result.to_json();
            let again = StoredPushResult::from_json(&json).expect("serialized result parses");
            assert_eq!(again, result, "push result round trip");
            assert_eq!(again.to_json(), json, "serialization is stable");
            Verdict::Accepted
        }
        Err(e) => {
            assert_eq!(
                e.code(),
                ErrorCode::IdempotencyCacheMiss,
                "refused with {e:?}"
            );
            Verdict::Refused
        }
    }
}

/// The schema registered queries are prepared against: `tasks` and
/// `projects` materialized, `vault` not.
pub fn query_schema() -> sync_core::CompiledSchema {
    let value = serde_json::json!({
        "version": 1,
        "tables": [
            {
                "name": "tasks",
                "primaryKey": "id",
                "columns": [
                    {"name": "id", "type": "string"},
                    {"name": "project_id", "type": "string"},
                    {"name": "title", "type": "string"}
                ],
                "scopes": ["project:{project_id}"]
            },
            {
                "name": "projects",
                "primaryKey": "id",
                "columns": [
                    {"name": "id", "type": "string"},
                    {"name": "name", "type": "string"}
                ],
                "scopes": ["project:{id}"]
            },
            {
                "name": "vault",
                "primaryKey": "id",
                "columns": [
                    {"name": "id", "type": "string"},
                    {"name": "org", "type": "string"},
                    {"name": "secret", "type": "bytes", "encrypted": true}
                ],
                "scopes": ["org:{org}"]
            }
        ]
    });
    let input = sync_schema::parse_schema_value(&value).expect("query schema parses");
    sync_schema::compile(&input).expect("query schema compiles")
}

const QUERY_REASONS: [&str; 8] = [
    "unterminated_literal",
    "unsupported_syntax",
    "multiple_statements",
    "reserved_reference",
    "unsupported_table_reference",
    "table_metadata_mismatch",
    "non_materialized_table",
    "bind_mismatch",
];

/// The partition every fuzzed query is prepared for (a hostile one).
pub const QUERY_PARTITION: &str = "p'); DROP TABLE sync_commits; --";

/// The first byte picks the parameter count and the declared tables; the
/// rest is the SQL. Refusals are `query_rejected` with a known reason on
/// both dialects alike; an accepted query binds the partition once per
/// reference, numbers Postgres placeholders densely, and lists only
/// compiled, materialized tables.
pub fn prepare_query(data: &[u8]) -> Verdict {
    let Some((&selector, sql)) = data.split_first() else {
        return Verdict::Refused;
    };
    let sql = text(sql);
    let params: Vec<SqlValue> = (0..usize::from(selector & 0x3))
        .map(|i| SqlValue::Text(format!("param-{i}'")))
        .collect();
    let names = ["tasks", "projects", "vault"];
    let tables: Vec<String> = names
        .iter()
        .enumerate()
        .filter(|(i, _)| selector & (0x4 << i) != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect();
    let schema = query_schema();
    let outcomes: Vec<_> = [sync_sqlite::DIALECT, sync_postgres::DIALECT]
        .into_iter()
        .map(|dialect| {
            sync_schema::prepare_query(&schema, dialect, QUERY_PARTITION, &sql, &params, &tables)
        })
        .collect();
    match (&outcomes[0], &outcomes[1]) {
        (Ok(sqlite), Ok(postgres)) => {
            assert_eq!(sqlite.params, postgres.params, "both dialects bind alike");
            assert_eq!(
                sqlite.tables, postgres.tables,
                "both dialects resolve alike"
            );
            let partition = SqlValue::Text(QUERY_PARTITION.to_owned());
            let partition_binds = sqlite.params.iter().filter(|p| **p == partition).count();
            let rewritten = postgres.sql.matches("\"_sync_partition\" = $").count();
            assert!(
                rewritten >= sqlite.tables.len() && partition_binds >= rewritten,
                "every reference binds the partition: {}",
                postgres.sql
            );
            for (i, _) in postgres.params.iter().enumerate() {
                assert!(
                    postgres.sql.contains(&format!("${}", i + 1)),
                    "placeholder ${} missing: {}",
                    i + 1,
                    postgres.sql
                );
            }
            for table in &sqlite.tables {
                let compiled = schema.table(table).expect("referenced tables are compiled");
                assert!(
                    compiled.materialize,
                    "non-materialized table {table} accepted"
                );
            }
            Verdict::Accepted
        }
        (Err(a), Err(b)) => {
            for e in [a, b] {
                assert_eq!(e.code(), ErrorCode::QueryRejected, "refused with {e:?}");
                let reason = e.get_detail("reason").unwrap_or_default();
                assert!(QUERY_REASONS.contains(&reason), "unknown reason {reason:?}");
            }
            assert_eq!(
                a.get_detail("reason"),
                b.get_detail("reason"),
                "both dialects refuse alike"
            );
            Verdict::Refused
        }
        (a, b) => panic!("dialects disagree: sqlite {a:?}, postgres {b:?}"),
    }
}

/// The first byte picks what the rest is: an SSP2 request (`0`), response
/// (`1`), SSG2 rows segment (`2`) or realtime control message (anything
/// else). Refusals carry a wire code (`sync.invalid_request`, or
/// `sync.empty_commit` for a request); an accepted message or segment
/// renders and re-encodes to exactly its input bytes; an accepted control
/// message renders to JSON that parses back to the same message.
pub fn ssp2_decode(data: &[u8]) -> Verdict {
    let Some((&selector, body)) = data.split_first() else {
        return Verdict::Refused;
    };
    let refused = |code: &str| {
        assert!(
            code == "sync.invalid_request" || (selector == 0 && code == "sync.empty_commit"),
            "refused with {code}"
        );
        Verdict::Refused
    };
    match selector {
        0 => match sync_ssp2::decode_request(body) {
            Ok(request) => {
                let _ = sync_ssp2::render::render_request(&request);
                let bytes = sync_ssp2::encode_request(&request).expect("a decoded request encodes");
                assert_eq!(bytes, body, "request re-encoding");
                Verdict::Accepted
            }
            Err(e) => refused(e.code()),
        },
        1 => match sync_ssp2::decode_response(body) {
            Ok(response) => {
                let _ = sync_ssp2::render::render_response(&response);
                let bytes =
                    sync_ssp2::encode_response(&response).expect("a decoded response encodes");
                assert_eq!(bytes, body, "response re-encoding");
                Verdict::Accepted
            }
            Err(e) => refused(e.code()),
        },
        2 => match sync_ssp2::decode_segment(body) {
            Ok(segment) => {
                let _ = sync_ssp2::render::render_segment(&segment);
                let bytes = sync_ssp2::encode_segment(&segment).expect("a decoded segment encodes");
                assert_eq!(bytes, body, "segment re-encoding");
                Verdict::Accepted
            }
            Err(e) => refused(e.code()),
        },
        _ => match sync_ssp2::realtime::parse_control_message(&text(body)) {
            Ok(message) => {
                let text = sync_ssp2::realtime::to_json_text(&message);
                let again = sync_ssp2::realtime::parse_control_message(&text)
                    .expect("a rendered control message parses");
                assert_eq!(again, message, "control message round trip");
                Verdict::Accepted
            }
            Err(e) => refused(e.code()),
        },
    }
}
