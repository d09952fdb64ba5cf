//! Differential tests of our codec at wire version 3 against the
//! reference's published codecs that speak it: `syncular-ssp2` 0.24.0
//! (the first release whose codec reads version 3) and 0.49.2; both read
//! version 3 only. Every test runs once against each.
//!
//! - Sparse rows (push payloads): for generated column tables and rows,
//!   both encoders give the same bytes and each decodes the other's; on
//!   arbitrary bytes both decoders accept exactly the same inputs, with the
//!   same values.
//! - Messages: a version-3 response with conflict records (their
//!   `conflictColumns`) and a version-3 request carrying sparse payloads,
//!   encoded by the reference, decode in ours, re-encode to the same bytes
//!   and render alike (§11); the reverse direction too.

/// The tests, against one release of the published codec.
macro_rules! v3_differential {
    ($module:ident, $oracle:ident) => {
        mod $module {
            use proptest::prelude::*;
            use serde_json::Value;
            use $oracle as theirs;
            use sync_ssp2 as ours;
            use theirs::model::{Frame as TF, Message as TMessage, MsgKind as TKind};
            use theirs::segment::{Column as TColumn, ColumnType as TT, ColumnValue as TV, SparseSlot};

            const SAFE: i64 = 9_007_199_254_740_991;

            fn our_type(t: TT) -> ours::ColumnType {
                match t {
                    TT::String => ours::ColumnType::String,
                    TT::Integer => ours::ColumnType::Integer,
                    TT::Float => ours::ColumnType::Float,
                    TT::Boolean => ours::ColumnType::Boolean,
                    TT::Json => ours::ColumnType::Json,
                    TT::Bytes => ours::ColumnType::Bytes,
                    TT::BlobRef => ours::ColumnType::BlobRef,
                    TT::Crdt => ours::ColumnType::Crdt,
                }
            }

            fn our_columns(columns: &[TColumn]) -> Vec<ours::Column> {
                columns
                    .iter()
                    .map(|c| ours::Column {
                        name: c.name.clone(),
                        column_type: our_type(c.ty),
                        nullable: c.nullable,
                    })
                    .collect()
            }

            fn our_value(v: &TV) -> ours::ColumnValue {
                let raw = |j: &theirs::primitives::RawJson| {
                    ours::RawJson::new(j.0.clone()).expect("the reference accepted it as JSON")
                };
                match v {
                    TV::String(s) => ours::ColumnValue::String(s.clone()),
                    TV::Integer(i) => ours::ColumnValue::Integer(*i),
                    TV::Float(f) => ours::ColumnValue::Float(*f),
                    TV::Boolean(b) => ours::ColumnValue::Boolean(*b),
                    TV::Json(j) => ours::ColumnValue::Json(raw(j)),
                    TV::Bytes(b) => ours::ColumnValue::Bytes(b.clone()),
                    TV::BlobRef(j) => ours::ColumnValue::BlobRef(raw(j)),
                    TV::Crdt(b) => ours::ColumnValue::Crdt(b.clone()),
                }
            }

            fn our_row(row: &[SparseSlot]) -> ours::SparseRow {
                ours::SparseRow::new(
                    row.iter()
                        .map(|slot| match slot {
                            SparseSlot::Absent => None,
                            SparseSlot::Null => Some(ours::ColumnValue::Null),
                            SparseSlot::Value(v) => Some(our_value(v)),
                        })
                        .collect(),
                )
            }

            mod generate {
                use super::*;

                pub fn column_type() -> impl Strategy<Value = TT> {
                    prop_oneof![
                        Just(TT::String),
                        Just(TT::Integer),
                        Just(TT::Float),
                        Just(TT::Boolean),
                        Just(TT::Json),
                        Just(TT::Bytes),
                        Just(TT::BlobRef),
                        Just(TT::Crdt),
                    ]
                }

                /// 1 to 12 columns, so both bitmaps span one or two bytes.
                pub fn columns() -> impl Strategy<Value = Vec<TColumn>> {
                    prop::collection::vec((column_type(), any::<bool>()), 1..12).prop_map(|cols| {
                        cols.into_iter()
                            .enumerate()
                            .map(|(i, (ty, nullable))| TColumn {
                                name: format!("c{i}"),
                                ty,
                                nullable,
                            })
                            .collect()
                    })
                }

                pub fn value(ty: TT) -> BoxedStrategy<TV> {
                    use theirs::primitives::RawJson;
                    match ty {
                        TT::String => "\\PC{0,6}".prop_map(TV::String).boxed(),
                        TT::Integer => (-SAFE..=SAFE).prop_map(TV::Integer).boxed(),
                        TT::Float => any::<f64>().prop_map(TV::Float).boxed(),
                        TT::Boolean => any::<bool>().prop_map(TV::Boolean).boxed(),
                        TT::Json => prop_oneof![
                            Just("null"),
                            Just("7"),
                            Just("\"x\""),
                            Just("{\"a\":[1,{\"b\":null}]}"),
                            Just(" [ true ] "),
                        ]
                        .prop_map(|s| TV::Json(RawJson(s.to_string())))
                        .boxed(),
                        TT::Bytes => prop::collection::vec(any::<u8>(), 0..6)
                            .prop_map(TV::Bytes)
                            .boxed(),
                        TT::Crdt => prop::collection::vec(any::<u8>(), 0..6)
                            .prop_map(TV::Crdt)
                            .boxed(),
                        TT::BlobRef => (any::<[u8; 32]>(), 0i64..1_000_000, any::<bool>())
                            .prop_map(|(id, len, named)| {
                                let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
                                let name = if named { r#","name":"a.txt""# } else { "" };
                                TV::BlobRef(RawJson(format!(
                                    r#"{{"blobId":"sha256:{hex}","byteLength":{len}{name}}}"#
                                )))
                            })
                            .boxed(),
                    }
                }

                /// A column table, its key and a row the reference's encoder takes:
                /// the key present and not null, nulls only where allowed.
                pub fn sparse_case() -> impl Strategy<Value = (Vec<TColumn>, usize, Vec<SparseSlot>)> {
                    columns()
                        .prop_flat_map(|columns| {
                            let key = 0..columns.len();
                            (Just(columns), key)
                        })
                        .prop_flat_map(|(columns, key)| {
                            let slots: Vec<BoxedStrategy<SparseSlot>> = columns
                                .iter()
                                .enumerate()
                                .map(|(i, c)| {
                                    let value = value(c.ty).prop_map(SparseSlot::Value);
                                    match (i == key, c.nullable) {
                                        (true, _) => value.boxed(),
                                        (false, true) => prop_oneof![
                                            Just(SparseSlot::Absent),
                                            Just(SparseSlot::Null),
                                            value
                                        ]
                                        .boxed(),
                                        (false, false) => {
                                            prop_oneof![Just(SparseSlot::Absent), value].boxed()
                                        }
                                    }
                                })
                                .collect();
                            (Just(columns), Just(key), slots)
                        })
                }
            }

            /// A column table, a key, and a row that may break the table's rules:
            /// a null in any column, the key included. The reference's encoder takes
            /// it against the same table with every column nullable, which gives the
            /// bytes of a payload breaking exactly the null rule (or none).
            fn relaxed_case() -> impl Strategy<Value = (Vec<TColumn>, usize, Vec<SparseSlot>)> {
                generate::columns()
                    .prop_flat_map(|columns| {
                        let key = 0..columns.len();
                        (Just(columns), key)
                    })
                    .prop_flat_map(|(columns, key)| {
                        let slots: Vec<BoxedStrategy<SparseSlot>> = columns
                            .iter()
                            .enumerate()
                            .map(|(i, c)| {
                                let value = generate::value(c.ty).prop_map(SparseSlot::Value);
                                if i == key {
                                    prop_oneof![Just(SparseSlot::Null), value].boxed()
                                } else {
                                    prop_oneof![Just(SparseSlot::Absent), Just(SparseSlot::Null), value]
                                        .boxed()
                                }
                            })
                            .collect();
                        (Just(columns), Just(key), slots)
                    })
            }

            fn all_nullable(columns: &[TColumn]) -> Vec<TColumn> {
                columns
                    .iter()
                    .map(|c| TColumn {
                        nullable: true,
                        ..c.clone()
                    })
                    .collect()
            }

            /// Nine columns of every type, as the reference's own sparse-row vectors
            /// use: two-byte presence bitmap with padding bits.
            fn nine_columns() -> Vec<TColumn> {
                [
                    (TT::String, false),
                    (TT::String, true),
                    (TT::Integer, true),
                    (TT::Float, false),
                    (TT::Boolean, true),
                    (TT::Json, true),
                    (TT::Bytes, false),
                    (TT::BlobRef, true),
                    (TT::Crdt, true),
                ]
                .into_iter()
                .enumerate()
                .map(|(i, (ty, nullable))| TColumn {
                    name: format!("c{i}"),
                    ty,
                    nullable,
                })
                .collect()
            }

            /// A response at version 3: header with its epoch, then one rejected
            /// commit whose records include conflicts with `conflictColumns`.
            fn v3_response(records: Vec<(i32, String, i64, Vec<u8>, Vec<u8>)>) -> TMessage {
                use theirs::model::{OpResult, PushStatus};
                TMessage {
                    wire_version: 3,
                    msg_kind: TKind::Response,
                    frames: vec![
                        TF::RespHeader {
                            required_schema_version: None,
                            latest_schema_version: Some(4),
                            log_epoch: Some("epoch-1".into()),
                            reset_required: Some(false),
                        },
                        TF::PushResult {
                            client_commit_id: "c-1".into(),
                            status: PushStatus::Rejected,
                            commit_seq: None,
                            results: records
                                .into_iter()
                                .map(
                                    |(op_index, message, server_version, server_row, conflict_columns)| {
                                        OpResult::Conflict {
                                            op_index,
                                            code: "sync.version_conflict".into(),
                                            message,
                                            server_version,
                                            server_row,
                                            conflict_columns,
                                        }
                                    },
                                )
                                .collect(),
                        },
                    ],
                }
            }

            proptest! {
                #![proptest_config(ProptestConfig::with_cases(256))]

                /// Both encoders write the same bytes for the same sparse row, and
                /// each decodes the other's to the same row.
                #[test]
                fn sparse_rows_encode_alike((columns, key, row) in generate::sparse_case()) {
                    let bytes = theirs::segment::encode_sparse_row(&columns, key, &row);
                    let our_columns = our_columns(&columns);
                    let expected = our_row(&row);
                    let ours_bytes = ours::encode_sparse_row(&our_columns, key, &expected)
                        .map_err(|e| TestCaseError::fail(format!("ours refused to encode: {e}")))?;
                    prop_assert_eq!(&ours_bytes, &bytes);
                    let decoded = ours::decode_sparse_row(&our_columns, key, &bytes)
                        .map_err(|e| TestCaseError::fail(format!("ours refused the reference's row: {e}")))?;
                    prop_assert_eq!(&decoded, &expected);
                    let back = theirs::segment::decode_sparse_row(&columns, key, &ours_bytes)
                        .map_err(|e| TestCaseError::fail(format!("the reference refused ours: {e}")))?;
                    prop_assert_eq!(our_row(&back), expected.clone());
                    // Every presence bit set: the suffix is the full-row encoding.
                    prop_assert_eq!(
                        ours::full_row_suffix(columns.len(), &bytes).is_some(),
                        expected.is_full()
                    );
                }

                /// On any bytes (random, or a valid row with bytes changed or cut),
                /// the two decoders accept exactly the same inputs with the same
                /// values, and refuse the rest with the same code.
                #[test]
                fn sparse_decoders_agree_on_any_bytes(
                    random in prop::collection::vec(any::<u8>(), 0..48),
                    (columns, key, row) in generate::sparse_case(),
                    edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
                    cut in proptest::option::of(any::<prop::sample::Index>()),
                    key9 in 0usize..9,
                    (relaxed_columns, relaxed_key, relaxed_row) in relaxed_case(),
                    other_key in any::<prop::sample::Index>(),
                ) {
                    let mut cases = vec![(nine_columns(), key9, random)];
                    // Nulls where the table forbids them, and a key other than the one
                    // the row was written with (absent or present).
                    let relaxed = theirs::segment::encode_sparse_row(
                        &all_nullable(&relaxed_columns),
                        relaxed_key,
                        &relaxed_row,
                    );
                    let other_key = other_key.index(relaxed_columns.len());
                    cases.push((relaxed_columns.clone(), relaxed_key, relaxed.clone()));
                    cases.push((relaxed_columns, other_key, relaxed));
                    let mut bytes = theirs::segment::encode_sparse_row(&columns, key, &row);
                    for (at, byte) in edits {
                        if !bytes.is_empty() {
                            let i = at.index(bytes.len());
                            bytes[i] = byte;
                        }
                    }
                    if let Some(at) = cut {
                        if !bytes.is_empty() {
                            bytes.truncate(at.index(bytes.len()));
                        }
                    }
                    cases.push((columns, key, bytes));
                    for (columns, key, bytes) in cases {
                        let theirs_result = theirs::segment::decode_sparse_row(&columns, key, &bytes);
                        let ours_result = ours::decode_sparse_row(&our_columns(&columns), key, &bytes);
                        match (theirs_result, ours_result) {
                            (Ok(t), Ok(o)) => prop_assert_eq!(o, our_row(&t)),
                            (Err(t), Err(o)) => prop_assert_eq!(t.code.as_str(), o.code()),
                            (t, o) => prop_assert!(
                                false,
                                "the decoders disagree on {:?}: reference {:?}, ours {:?}",
                                bytes, t.map(|_| ()), o.map(|_| ())
                            ),
                        }
                    }
                }

                /// A version-3 response with conflict records: the reference's bytes
                /// decode in ours, re-encode to the same bytes and render alike; ours
                /// decode in the reference to the same message.
                #[test]
                fn v3_conflict_records_agree(
                    records in prop::collection::vec(
                        (
                            0i32..50,
                            "\\PC{0,8}",
                            1i64..=SAFE,
                            prop::collection::vec(any::<u8>(), 0..8),
                            prop::collection::vec(any::<u8>(), 0..4),
                        ),
                        1..4,
                    )
                ) {
                    let message = v3_response(records);
                    let bytes = theirs::encode_message(&message);
                    let decoded = ours::decode_response(&bytes)
                        .map_err(|e| TestCaseError::fail(format!("ours refused: {e}")))?;
                    prop_assert_eq!(decoded.wire_version, ours::WireVersion::V3);
                    let reencoded = ours::encode_response(&decoded)
                        .map_err(|e| TestCaseError::fail(format!("ours refused to encode: {e}")))?;
                    prop_assert_eq!(&reencoded, &bytes);
                    prop_assert_eq!(
                        ours::render::render_response(&decoded),
                        theirs::render_message(&message)
                    );
                    let back = theirs::decode_message(&reencoded)
                        .map_err(|e| TestCaseError::fail(format!("the reference refused ours: {e}")))?;
                    prop_assert_eq!(back, message);
                }

                /// A version-3 push whose payloads are sparse rows (the reference's
                /// encoder's) decodes in ours, re-encodes to the same bytes, renders
                /// alike, and each payload decodes as the same sparse row.
                #[test]
                fn v3_push_requests_agree(
                    (columns, key, row) in generate::sparse_case(),
                    base_version in proptest::option::of(0i64..1000),
                    epoch in proptest::option::of("[a-z0-9]{1,8}"),
                ) {
                    use theirs::model::{Op, Operation};
                    let payload = theirs::segment::encode_sparse_row(&columns, key, &row);
                    let message = TMessage {
                        wire_version: 3,
                        msg_kind: TKind::Request,
                        frames: vec![
                            TF::ReqHeader {
                                client_id: "client-a".into(),
                                schema_version: 2,
                                log_epoch: epoch,
                            },
                            TF::PushCommit {
                                client_commit_id: "commit-1".into(),
                                operations: vec![
                                    Operation {
                                        table: "tasks".into(),
                                        row_id: "r1".into(),
                                        op: Op::Upsert,
                                        base_version,
                                        payload: Some(payload.clone()),
                                    },
                                    Operation {
                                        table: "tasks".into(),
                                        row_id: "r2".into(),
                                        op: Op::Delete,
                                        base_version: Some(3),
                                        payload: None,
                                    },
                                ],
                            },
                        ],
                    };
                    let bytes = theirs::encode_message(&message);
                    let decoded = ours::decode_request(&bytes)
                        .map_err(|e| TestCaseError::fail(format!("ours refused: {e}")))?;
                    prop_assert_eq!(decoded.wire_version, ours::WireVersion::V3);
                    prop_assert_eq!(ours::encode_request(&decoded).ok(), Some(bytes.clone()));
                    prop_assert_eq!(
                        ours::render::render_request(&decoded),
                        theirs::render_message(&message)
                    );
                    let Some(ours::RequestFrame::PushCommit(commit)) = decoded.frames.get(1) else {
                        return Err(TestCaseError::fail("no push commit decoded"));
                    };
                    let ours::PushOp::Upsert { payload: carried } = &commit.operations[0].op else {
                        return Err(TestCaseError::fail("the upsert lost its payload"));
                    };
                    prop_assert_eq!(carried, &payload);
                    prop_assert_eq!(
                        ours::decode_sparse_row(&our_columns(&columns), key, carried).ok(),
                        Some(our_row(&row))
                    );
                }
            }

            /// The two codecs render a version-3 conflict record alike, with
            /// `conflictColumns` as base64.
            #[test]
            fn a_conflict_record_renders_conflict_columns_as_base64() {
                let message = v3_response(vec![(
                    0,
                    "stale".into(),
                    7,
                    vec![0, 1, 2],
                    vec![0b0000_0110, 0],
                )]);
                let bytes = theirs::encode_message(&message);
                let rendered = ours::render::render_response(&ours::decode_response(&bytes).unwrap());
                let record = &rendered["frames"][1]["results"][0];
                assert_eq!(record["conflictColumns"], Value::from("BgA="));
                assert_eq!(rendered, theirs::render_message(&message));
            }
        }
    };
}

v3_differential!(release_0_24_0, ssp2_v3_first);
v3_differential!(release_0_49_2, ssp2_v3);
