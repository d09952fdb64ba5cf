//! Property tests of the five hostile-input parsers with structured
//! strategies (the fuzz driver mutates bytes; these build well-formed and
//! nearly well-formed inputs): schema JSON → compile, layouts JSON, the
//! payload codec, push-result JSON and registered-query preparation. Each
//! input goes through the shared fuzz body, which asserts "coded error or
//! accepted and round-tripped, never a panic".

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{json, Value};
use sync_core::codec::{self, ColumnShape};
use sync_core::{
    ColumnType, PushOperationResult, PushStatus, RejectionDetails, RowValue, StoredPushResult,
};
use syncstore_tests::fuzz_bodies::{self, Verdict};

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z][a-z0-9_]{0,10}",
        Just("sync_x".to_owned()),
        Just("_SYNC".to_owned()),
        Just("x\"); DROP TABLE sync_commits; --".to_owned()),
        Just("a\u{0}b".to_owned()),
        Just("é".repeat(32)),
        Just("i".repeat(63)),
        Just(String::new()),
        any::<String>(),
    ]
}

fn column_type() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "string", "integer", "float", "boolean", "json", "bytes", "blob_ref", "crdt"
        ])
        .prop_map(str::to_owned),
        any::<String>(),
    ]
}

fn column() -> impl Strategy<Value = Value> {
    (
        name(),
        column_type(),
        prop::option::of(any::<bool>()),
        prop::option::of(name()),
        prop::option::of(any::<bool>()),
        prop::option::of(column_type()),
    )
        .prop_map(|(name, ty, nullable, crdt, encrypted, declared)| {
            let mut c = json!({"name": name, "type": ty});
            if let Some(n) = nullable {
                c["nullable"] = json!(n);
            }
            if let Some(t) = crdt {
                c["crdtType"] = json!(t);
            }
            if let Some(e) = encrypted {
                c["encrypted"] = json!(e);
            }
            if let Some(d) = declared {
                c["declaredType"] = json!(d);
            }
            c
        })
}

fn table() -> impl Strategy<Value = Value> {
    (
        name(),
        prop::collection::vec(column(), 0..6),
        prop::collection::vec(prop_oneof!["[a-z]{1,4}:\\{[a-z]{1,4}\\}", any::<String>()], 0..3),
        prop::collection::vec((name(), prop::collection::vec(name(), 0..3), any::<bool>()), 0..3),
        prop::option::of(any::<bool>()),
        any::<u8>(),
    )
        .prop_map(|(name, columns, scopes, indexes, materialize, pk)| {
            let pk = columns
                .get(usize::from(pk) % columns.len().max(1))
                .and_then(|c| c["name"].as_str())
                .unwrap_or("id")
                .to_owned();
            let indexes: Vec<Value> = indexes
                .into_iter()
                .map(|(n, cols, unique)| json!({"name": n, "columns": cols, "unique": unique}))
                .collect();
            let mut t = json!({"name": name, "primaryKey": pk, "columns": columns, "scopes": scopes, "indexes": indexes});
            if let Some(m) = materialize {
                t["materialize"] = json!(m);
            }
            t
        })
}

fn schema_json() -> impl Strategy<Value = String> {
    (
        prop_oneof![Just(1i64), Just(0), Just(2_147_483_648), any::<i64>()],
        prop::collection::vec(table(), 0..3),
    )
        .prop_map(|(version, tables)| json!({"version": version, "tables": tables}).to_string())
}

fn layouts_json() -> impl Strategy<Value = String> {
    let member = prop_oneof![
        any::<String>().prop_map(Value::String),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        Just(Value::Null),
    ];
    let column = prop::collection::btree_map(
        prop::sample::select(vec!["name", "type", "nullable", "extra"]).prop_map(str::to_owned),
        member,
        0..5,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()));
    prop::collection::btree_map(
        name(),
        prop::collection::vec(column, 0..4).prop_map(Value::Array),
        0..4,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()).to_string())
}

fn value_for(shape: ColumnShape) -> BoxedStrategy<RowValue> {
    let value: BoxedStrategy<RowValue> = match shape.column_type {
        ColumnType::String => any::<String>().prop_map(RowValue::String).boxed(),
        ColumnType::Integer => (-(1i64 << 53) + 1..(1i64 << 53))
            .prop_map(RowValue::Integer)
            .boxed(),
        ColumnType::Float => any::<f64>().prop_map(RowValue::Float).boxed(),
        ColumnType::Boolean => any::<bool>().prop_map(RowValue::Boolean).boxed(),
        ColumnType::Json => any::<String>()
            .prop_map(|s| RowValue::Json(json!({"k": s}).to_string()))
            .boxed(),
        ColumnType::Bytes => prop::collection::vec(any::<u8>(), 0..64)
            .prop_map(RowValue::Bytes)
            .boxed(),
        ColumnType::BlobRef => any::<String>()
            .prop_map(|s| RowValue::BlobRef(json!({"blobId": format!("b{s}")}).to_string()))
            .boxed(),
        ColumnType::Crdt => prop::collection::vec(any::<u8>(), 0..64)
            .prop_map(RowValue::Crdt)
            .boxed(),
    };
    if shape.nullable {
        prop_oneof![Just(RowValue::Null), value].boxed()
    } else {
        value
    }
}

fn row() -> impl Strategy<Value = (Vec<ColumnShape>, Vec<RowValue>)> {
    prop::collection::vec((0..8usize, any::<bool>()), 0..19)
        .prop_map(|shapes| {
            shapes
                .into_iter()
                .map(|(t, n)| ColumnShape::new(ColumnType::ALL[t], n))
                .collect::<Vec<_>>()
        })
        .prop_flat_map(|shapes| {
            let values: Vec<BoxedStrategy<RowValue>> =
                shapes.iter().map(|s| value_for(*s)).collect();
            (Just(shapes), values)
        })
}

fn shape_byte(shape: &ColumnShape) -> u8 {
    let t = ColumnType::ALL
        .iter()
        .position(|x| *x == shape.column_type)
        .unwrap_or(0) as u8;
    t | if shape.nullable { 0x80 } else { 0 }
}

fn push_result() -> impl Strategy<Value = StoredPushResult> {
    let details = (
        prop::option::of(prop::collection::vec(any::<String>(), 0..3)),
        prop::option::of(any::<String>()),
        prop::option::of(any::<String>()),
        prop::option::of(prop::collection::btree_map(
            any::<String>(),
            any::<String>(),
            0..3,
        )),
    )
        .prop_map(
            |(field_paths, reason, required_action, references)| RejectionDetails {
                field_paths,
                reason,
                required_action,
                references,
            },
        );
    let op = prop_oneof![
        any::<u32>().prop_map(|op_index| PushOperationResult::Applied { op_index }),
        (
            any::<u32>(),
            any::<String>(),
            any::<String>(),
            any::<i64>(),
            prop::collection::vec(any::<u8>(), 0..32),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..4)),
        )
            .prop_map(
                |(op_index, code, message, server_version, server_row, conflict_columns)| {
                    PushOperationResult::Conflict {
                        op_index,
                        code,
                        message,
                        server_version,
                        server_row,
                        conflict_columns,
                    }
                },
            ),
        (
            any::<u32>(),
            any::<String>(),
            any::<String>(),
            any::<bool>(),
            prop::option::of(details)
        )
            .prop_map(|(op_index, code, message, retryable, details)| {
                PushOperationResult::Error {
                    op_index,
                    code,
                    message,
                    retryable,
                    details,
                }
            }),
    ];
    (
        any::<bool>(),
        any::<i64>(),
        prop::option::of(any::<i64>()),
        prop::option::of(any::<String>()),
        prop::collection::vec(op, 0..4),
        prop::option::of(any::<String>()),
    )
        .prop_map(
            |(applied, seq, recorded_at_ms, cache_identity, results, actor_id)| StoredPushResult {
                status: if applied {
                    PushStatus::Applied
                } else {
                    PushStatus::Rejected
                },
                commit_seq: applied.then_some(seq),
                recorded_at_ms,
                cache_identity,
                results,
                actor_id,
            },
        )
}

fn sql() -> impl Strategy<Value = (u8, String)> {
    let token = prop::sample::select(vec![
        "SELECT",
        "*",
        "id",
        ",",
        "title",
        "FROM",
        "JOIN",
        "tasks",
        "TASKS",
        "\"tasks\"",
        "projects",
        "vault",
        "t",
        "AS",
        "ON",
        "WHERE",
        "=",
        "?",
        "?1",
        "?2",
        "(",
        ")",
        ".",
        ";",
        "'x'",
        "'?; FROM tasks'",
        "-- c\n",
        "/* c */",
        "sync_commits",
        "_sync_partition",
        "main",
        "UNION",
        "WITH",
        "x",
        "[tasks]",
        "`tasks`",
        "$$",
        "E",
        "'\\''",
        "U&",
        "\"\\0073ync\"",
        "INTO",
        "DELETE",
        "/* /* */",
        "\n",
        " ",
    ]);
    (any::<u8>(), prop::collection::vec(token, 0..24))
        .prop_map(|(selector, tokens)| (selector, tokens.join(" ")))
}

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn schema_inputs_compile_or_are_refused_with_schema_codes(text in schema_json()) {
        fuzz_bodies::schema_compile(text.as_bytes());
    }

    #[test]
    fn layouts_parse_and_round_trip_or_are_corrupt(text in layouts_json()) {
        fuzz_bodies::layouts(text.as_bytes());
    }

    #[test]
    fn encoded_rows_decode_to_themselves_and_pass_the_body((columns, values) in row()) {
        let payload = codec::encode(&columns, &values).unwrap();
        let decoded = codec::decode(&columns, &payload).unwrap();
        // NaN != NaN: compare floats by bits.
        let bits = |v: &RowValue| match v { RowValue::Float(f) => format!("f{}", f.to_bits()), other => format!("{other:?}") };
        prop_assert_eq!(decoded.iter().map(bits).collect::<Vec<_>>(), values.iter().map(bits).collect::<Vec<_>>());
        let mut input = vec![columns.len() as u8];
        input.extend(columns.iter().map(shape_byte));
        input.extend(&payload);
        prop_assert_eq!(fuzz_bodies::codec_roundtrip(&input), Verdict::Accepted);
    }

    #[test]
    fn arbitrary_payload_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        fuzz_bodies::codec_roundtrip(&bytes);
    }

    #[test]
    fn push_results_round_trip(result in push_result()) {
        let json = result.to_json();
        prop_assert_eq!(StoredPushResult::from_json(&json).unwrap(), result);
        prop_assert_eq!(fuzz_bodies::push_result_json(json.as_bytes()), Verdict::Accepted);
    }

    #[test]
    fn arbitrary_json_push_results_are_parsed_or_cache_misses(value in layouts_json(), extra in any::<String>()) {
        fuzz_bodies::push_result_json(value.as_bytes());
        fuzz_bodies::push_result_json(extra.as_bytes());
        let shaped: BTreeMap<&str, Value> = [("status", json!(extra)), ("commitSeq", json!(1)), ("results", json!([{"opIndex": -1}]))].into();
        fuzz_bodies::push_result_json(serde_json::to_string(&shaped).unwrap().as_bytes());
    }

    #[test]
    fn registered_queries_prepare_alike_or_are_rejected_alike((selector, text) in sql()) {
        let mut input = vec![selector];
        input.extend(text.as_bytes());
        fuzz_bodies::prepare_query(&input);
    }
}
