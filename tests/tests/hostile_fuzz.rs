//! The stable driver of the six fuzz targets (`tests/src/fuzz_bodies.rs`):
//! seeded mutation fuzzing — bit flips, interesting bytes, dictionary
//! tokens, deletions, duplications, splices and truncations of hand-written
//! seeds — for `SYNCSTORE_FUZZ_EXECS` executions per target. It runs on the
//! stable toolchain in the normal test suite; the cargo-fuzz targets in
//! `fuzz/` run the same bodies under libFuzzer where a nightly toolchain is
//! available.
//!
//! A panic of a body is a finding: the test fails with the input in hex.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use serde_json::json;
use sync_core::{codec, RowValue, StoredPushResult};
use syncstore_tests::fuzz_bodies::{self, Verdict, TARGETS};
use syncstore_tests::{budget, fixture};

/// SplitMix64: deterministic, so every run executes the same inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

const INTERESTING: [u8; 20] = [
    0, 1, 0x7f, 0x80, 0xff, b'"', b'\'', b'{', b'}', b'[', b']', b',', b':', b'\\', b'-', b'/',
    b'*', b';', b'?', b'$',
];

fn seeds_and_dictionary(target: &str) -> (Vec<Vec<u8>>, Vec<&'static str>) {
    match target {
        "schema_compile" => {
            let table = |name: &str, column: &str| {
                json!({
                    "name": name,
                    "primaryKey": "id",
                    "columns": [
                        {"name": "id", "type": "string"},
                        {"name": column, "type": "integer", "nullable": true},
                        {"name": "org", "type": "string"},
                        {"name": "doc", "type": "crdt", "crdtType": "yjs", "nullable": true},
                        {"name": "sec", "type": "bytes", "encrypted": true, "declaredType": "json", "nullable": true}
                    ],
                    "scopes": ["org:{org}", {"pattern": "row:{rid}", "column": "id"}],
                    "indexes": [{"name": format!("{name}_ix"), "columns": [column, "org"], "unique": true}],
                    "materialize": true
                })
            };
            let wide: Vec<_> = (0..1000)
                .map(|i| json!({"name": format!("c{i}"), "type": "string", "nullable": i > 0}))
                .collect();
            let seeds = [
                json!({"version": 1, "tables": []}),
                json!({"version": 3, "tables": [table("tasks", "n"), table("Projects", "m")]}),
                json!({"version": 2, "tables": [table("ta\"ble", "co\"l"), table("x'); DROP TABLE sync_commits; --", "y")]}),
                json!({"version": 2147483647, "tables": [table(&"é".repeat(31), &"i".repeat(63))]}),
                json!({"version": 1, "tables": [{"name": "wide", "primaryKey": "c0", "columns": wide, "scopes": ["w:{c0}"]}]}),
            ];
            let dictionary = vec![
                "\"version\"",
                "\"tables\"",
                "\"name\"",
                "\"columns\"",
                "\"type\"",
                "\"nullable\"",
                "\"primaryKey\"",
                "\"scopes\"",
                "\"indexes\"",
                "\"materialize\"",
                "\"crdtType\"",
                "\"encrypted\"",
                "\"declaredType\"",
                "\"unique\"",
                "\"pattern\"",
                "\"column\"",
                "true",
                "false",
                "null",
                "2147483648",
                "-1",
                "0",
                "1e3",
                "\"sync_x\"",
                "\"_sync\"",
                "\"a:{b}\"",
                "\"{x}\"",
                "\"crdt\"",
                "\"json\"",
                "\"blob_ref\"",
                "\"bytes\"",
                "\"boolean\"",
                "\"float\"",
                "\"\\u0000\"",
                "\"\\\"\"",
                "[]",
                "{}",
            ];
            (
                seeds.iter().map(|v| v.to_string().into_bytes()).collect(),
                dictionary,
            )
        }
        "layouts" => {
            let seeds = vec![
                sync_schema::layouts_json(&fixture::schema(3)),
                sync_schema::layouts_json(&fuzz_bodies::query_schema()),
                "{}".to_owned(),
                r#"{"a":[{"name":"x","type":"weird","nullable":true,"extra":[1,2]}],"a":[]}"#
                    .to_owned(),
                r#"{"t\"'; --":[{"name":"\u0000","type":"string","nullable":false}]}"#.to_owned(),
            ];
            let dictionary = vec![
                "\"name\"",
                "\"type\"",
                "\"nullable\"",
                "true",
                "null",
                "[]",
                "{}",
                "\"string\"",
                "1",
                "\"\\ud800\"",
                ",",
                ":",
            ];
            (
                seeds.into_iter().map(String::into_bytes).collect(),
                dictionary,
            )
        }
        "codec_roundtrip" => {
            use sync_core::codec::ColumnShape;
            use sync_core::ColumnType as T;
            let columns = [
                ColumnShape::new(T::String, false),
                ColumnShape::new(T::Integer, true),
                ColumnShape::new(T::Float, false),
                ColumnShape::new(T::Boolean, true),
                ColumnShape::new(T::Json, true),
                ColumnShape::new(T::Bytes, false),
                ColumnShape::new(T::BlobRef, true),
                ColumnShape::new(T::Crdt, true),
                ColumnShape::new(T::String, true),
            ];
            let values = vec![
                RowValue::String("x'); DROP TABLE t; --".into()),
                RowValue::Integer((1 << 53) - 1),
                RowValue::Float(f64::NAN),
                RowValue::Null,
                RowValue::Json(r#"{"a":[1,2.5e300,"\u0000"]}"#.into()),
                RowValue::Bytes(vec![0, 0xff, 0x27]),
                RowValue::BlobRef(r#"{"blobId":"b'1"}"#.into()),
                RowValue::Crdt(vec![1, 2, 3]),
                RowValue::String("é\u{0}".into()),
            ];
            let payload = codec::encode(&columns, &values).expect("seed encodes");
            // Header: column count, then one shape byte per column (type
            // index, 0x80 = nullable), as the body reads it.
            let shape = |c: &ColumnShape| {
                let t = T::ALL.iter().position(|x| *x == c.column_type).unwrap_or(0) as u8;
                t | if c.nullable { 0x80 } else { 0 }
            };
            let mut seed = vec![columns.len() as u8];
            seed.extend(columns.iter().map(shape));
            seed.extend(payload);
            let dictionary = vec![
                "\u{0}\u{0}\u{0}\u{0}",
                "\u{ff}\u{ff}\u{ff}\u{7f}",
                "{\"blobId\":\"\"}",
                "{}",
            ];
            (vec![seed, vec![0], vec![1, 0, 0]], dictionary)
        }
        "push_result_json" => {
            let seeds = vec![
                StoredPushResult::applied(7).to_json(),
                r#"{"status":"rejected","recordedAtMs":1700000000000,"cacheIdentity":"5f0c","results":[{"opIndex":0,"status":"conflict","code":"sync.version_conflict","message":"stale","serverVersion":3,"serverRow":"AAEC"},{"opIndex":1,"status":"error","code":"sync.forbidden","message":"no","retryable":false,"details":{"reason":"x","fieldPaths":["a"],"requiredAction":"r","references":{"k":"v"}}}]}"#.to_owned(),
                r#"{"status":"applied","commitSeq":9007199254740991,"results":[{"opIndex":4294967295,"status":"applied"}]}"#.to_owned(),
            ];
            let dictionary = vec![
                "\"status\"",
                "\"applied\"",
                "\"rejected\"",
                "\"conflict\"",
                "\"error\"",
                "\"commitSeq\"",
                "\"opIndex\"",
                "\"serverRow\"",
                "\"details\"",
                "\"references\"",
                "-1",
                "1e400",
                "4294967296",
                "\"====\"",
                "null",
                "[]",
            ];
            (
                seeds.into_iter().map(String::into_bytes).collect(),
                dictionary,
            )
        }
        "prepare_query" => {
            let with = |selector: u8, sql: &str| {
                let mut v = vec![selector];
                v.extend_from_slice(sql.as_bytes());
                v
            };
            let seeds = vec![
                with(0x4 | 1, "SELECT id, '?; FROM tasks' AS lit FROM tasks /* ? FROM tasks */ WHERE project_id = ?1 -- ? FROM tasks\n  OR title = ?1"),
                with(0x4 | 0x8, "SELECT t.id, p.name FROM tasks AS t JOIN \"projects\" p ON p.id = t.project_id"),
                with(0x4 | 2, "SELECT * FROM (tasks) WHERE id = ? AND title = ?"),
                with(0x4, "SELECT * FROM tasks UNION SELECT * FROM sync_commits"),
                with(0x4, "WITH x AS (SELECT * FROM tasks) SELECT * FROM x, tasks"),
                with(0x10, "SELECT * FROM vault"),
                with(0x4, "SELECT $$'$$, c.* FROM tasks c --'"),
            ];
            let dictionary = vec![
                " FROM ",
                " JOIN ",
                " tasks",
                " TASKS",
                "\"tasks\"",
                "[tasks]",
                "`tasks`",
                " projects",
                " vault",
                " sync_commits",
                "\"sync_changes\"",
                " _sync_partition",
                "'",
                "\"",
                "`",
                "[",
                "]",
                "--",
                "/*",
                "*/",
                "?",
                "?1",
                "?0",
                "?99999999999999999999",
                ";",
                ".",
                "(",
                " AS ",
                " ON ",
                " main.",
                " public.",
                "$$",
                "E'\\'",
                "U&\"",
                "\\",
                " UNION SELECT ",
                " WITH x AS ",
                "\n",
            ];
            (seeds, dictionary)
        }
        "ssp2_decode" => (
            ssp2_seeds(),
            vec![
                "\u{0}\u{0}\u{0}\u{0}",
                "\u{ff}\u{ff}\u{ff}\u{ff}",
                "SSP2",
                "SSG2",
                "\"event\"",
                "{}",
                "null",
            ],
        ),
        other => panic!("no seeds for {other}"),
    }
}

/// One request, one response (every section kind, an unknown frame, an
/// error), one segment and two control messages, each behind its selector
/// byte, all built with the codec.
fn ssp2_seeds() -> Vec<Vec<u8>> {
    use sync_ssp2::*;
    let with = |selector: u8, bytes: Vec<u8>| {
        let mut v = vec![selector];
        v.extend(bytes);
        v
    };
    let scopes =
        ScopeMap::from_entries([("project".to_owned(), vec!["p1".to_owned()])]).expect("one key");
    let header = ReqHeader {
        client_id: "client-a".into(),
        schema_version: 1,
        log_epoch: Some("e1".into()),
    };
    let commit = PushCommit {
        client_commit_id: "c1".into(),
        operations: vec![PushOperation {
            table: "tasks".into(),
            row_id: "t1".into(),
            base_version: Some(2),
            op: PushOp::Upsert {
                payload: vec![0, 1, 0, 0, 0, b'x'],
            },
        }],
    };
    let subscription = Subscription {
        id: "s1".into(),
        table: "tasks".into(),
        scopes: scopes.clone(),
        params: Some(RawJson::new(r#"{"a":[1,2.5]}"#).expect("JSON")),
        cursor: -1,
        bootstrap_state: None,
    };
    let request = Request::from_parts(
        WireVersion::V2,
        header,
        vec![commit],
        Some((PullHeader::default(), vec![subscription])),
    );
    let segment = RowsSegment {
        table: "tasks".into(),
        schema_version: 1,
        columns: vec![
            Column {
                name: "id".into(),
                column_type: ColumnType::String,
                nullable: false,
            },
            Column {
                name: "n".into(),
                column_type: ColumnType::Integer,
                nullable: true,
            },
            Column {
                name: "meta".into(),
                column_type: ColumnType::Json,
                nullable: true,
            },
        ],
        blocks: vec![vec![
            SegmentRow {
                server_version: 3,
                values: vec![
                    ColumnValue::String("t1".into()),
                    ColumnValue::Null,
                    ColumnValue::Json(RawJson::new("{}").expect("JSON")),
                ],
            },
            SegmentRow {
                server_version: 1,
                values: vec![
                    ColumnValue::String("t2".into()),
                    ColumnValue::Integer(-4),
                    ColumnValue::Null,
                ],
            },
        ]],
    };
    let start = |bootstrap: bool| {
        ResponseFrame::SubStart(SubStart {
            id: "s1".into(),
            status: SubStatus::Active,
            reason_code: String::new(),
            effective_scopes: scopes.clone(),
            bootstrap,
        })
    };
    let response = Response {
        wire_version: WireVersion::V1,
        frames: vec![
            ResponseFrame::RespHeader(RespHeader::default()),
            ResponseFrame::Lease(Lease {
                lease_id: "l1".into(),
                expires_at_ms: 1_700_000_000_000,
            }),
            ResponseFrame::PushResult(PushResult {
                client_commit_id: "c1".into(),
                status: PushStatus::Rejected,
                results: vec![OpResult {
                    op_index: 0,
                    kind: OpResultKind::Conflict {
                        code: "sync.version_conflict".into(),
                        message: "stale".into(),
                        server_version: 3,
                        server_row: vec![0, 1],
                        conflict_columns: None,
                    },
                }],
            }),
            start(false),
            ResponseFrame::Commit(Commit {
                commit_seq: 7,
                created_at_ms: 1_700_000_000_000,
                actor_id: "a1".into(),
                tables: vec!["tasks".into()],
                changes: vec![Change {
                    table_index: 0,
                    row_id: "t1".into(),
                    scopes: StoredScopes::from_entries([("project".to_owned(), "p1".to_owned())])
                        .expect("one key"),
                    op: ChangeOp::Upsert {
                        row_version: 2,
                        row: vec![0, 2, 0, 0, 0, b'h', b'i'],
                    },
                }],
            }),
            ResponseFrame::SubEnd(SubEnd {
                next_cursor: 7,
                bootstrap_state: None,
            }),
            ResponseFrame::Unknown(UnknownFrame {
                frame_type: 0x17,
                payload: vec![1, 2, 3],
            }),
            start(true),
            ResponseFrame::SegmentInline(SegmentInline::from_segment(&segment).expect("segment")),
            ResponseFrame::SegmentRef(SegmentRef {
                segment_id: "sha256:00".into(),
                media_type: MediaType::Rows,
                table: "tasks".into(),
                byte_length: 10,
                row_count: 2,
                as_of_commit_seq: 7,
                scope_digest: sync_ssp2::digest::scope_digest(&scopes),
                row_cursor: None,
                next_row_cursor: Some("t2".into()),
                url: Some(SignedUrl {
                    url: "https://x/".into(),
                    expires_at_ms: 5,
                }),
            }),
            ResponseFrame::Error(ErrorFrame {
                code: "sync.rate_limited".into(),
                message: "slow down".into(),
                category: "rate-limited".into(),
                retryable: true,
                recommended_action: "retryLater".into(),
                details: Some(RawJson::new(r#"{"after":5}"#).expect("JSON")),
            }),
        ],
    };
    // A short response, so that mutations often land on its bool bytes.
    let short = Response {
        wire_version: WireVersion::V2,
        frames: vec![
            ResponseFrame::RespHeader(RespHeader {
                required_schema_version: None,
                latest_schema_version: Some(1),
                epoch: Some(ResponseEpoch {
                    log_epoch: "e".into(),
                    reset_required: true,
                }),
            }),
            start(true),
            ResponseFrame::SubEnd(SubEnd {
                next_cursor: 1,
                bootstrap_state: None,
            }),
        ],
    };
    vec![
        with(1, encode_response(&short).expect("short seed response encodes")),
        with(0, encode_request(&request).expect("seed request encodes")),
        with(1, encode_response(&response).expect("seed response encodes")),
        with(2, encode_segment(&segment).expect("seed segment encodes")),
        with(3, br#"{"event":"sync","data":{"cursor":64,"requiresPull":true,"reason":"catchup-required","timestamp":1}}"#.to_vec()),
        with(3, br#"{"event":"presence","data":{"scopeKey":"project:p1","kind":"join","actorId":"a","clientId":"c","doc":{"x":1},"timestamp":2}}"#.to_vec()),
    ]
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], dictionary: &[&str]) -> Vec<u8> {
    let mut data = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 => {
                let token = dictionary[rng.below(dictionary.len())].as_bytes();
                let at = rng.below(len + 1);
                data.splice(at..at, token.iter().copied());
            }
            3 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(16)).min(len);
                data.drain(start..end);
            }
            4 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(32)).min(len);
                let chunk: Vec<u8> = data[start..end].to_vec();
                let at = rng.below(len + 1);
                data.splice(at..at, chunk);
            }
            5 => {
                let other = &seeds[rng.below(seeds.len())];
                let cut = rng.below(len + 1);
                let from = rng.below(other.len() + 1);
                data.truncate(cut);
                data.extend_from_slice(&other[from..]);
            }
            6 if len > 0 => data.truncate(rng.below(len)),
            _ => {
                let at = rng.below(len + 1);
                let byte = (rng.next() & 0xff) as u8;
                data.insert(at, byte);
            }
        }
    }
    data
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn fuzz_bodies_survive_mutated_inputs() {
    let execs = budget::fuzz_execs();
    let mut report = BTreeMap::new();
    for (t, target) in TARGETS.iter().enumerate() {
        let (seeds, dictionary) = seeds_and_dictionary(target);
        let mut rng =
            Rng(budget::model_seed() ^ (t as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
        let mut verdicts: BTreeMap<Verdict, u64> = BTreeMap::new();
        for i in 0..execs {
            let input = if (i as usize) < seeds.len() {
                seeds[i as usize].clone()
            } else {
                mutate(&mut rng, &seeds, &dictionary)
            };
            let outcome = catch_unwind(AssertUnwindSafe(|| fuzz_bodies::run(target, &input)));
            match outcome {
                Ok(verdict) => *verdicts.entry(verdict).or_default() += 1,
                Err(_) => panic!(
                    "fuzz target {target}: finding at execution {i}; input (hex) {}; as text {:?}",
                    hex(&input),
                    String::from_utf8_lossy(&input)
                ),
            }
        }
        report.insert(*target, verdicts);
    }
    for (target, verdicts) in &report {
        println!("fuzz (stable driver) {target}: {execs} executions, verdicts {verdicts:?}");
        assert!(
            verdicts.get(&Verdict::Accepted).copied().unwrap_or(0) > 0,
            "{target}: no mutated input was accepted; the seeds or the mutator are broken"
        );
        assert!(
            verdicts.get(&Verdict::Refused).copied().unwrap_or(0) > 0,
            "{target}: no input was refused; the mutator never produced hostile input"
        );
    }
}
