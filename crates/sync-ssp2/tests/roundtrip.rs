//! Property tests: typed values survive encode → decode unchanged, any
//! bytes decode without panicking, and every accepted input re-encodes to
//! itself (one canonical encoding per value).

use std::path::{Path, PathBuf};

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;
use sync_ssp2::*;

const MAX_SAFE: i64 = 9_007_199_254_740_991;

fn safe_i64() -> impl Strategy<Value = i64> {
    prop_oneof![
        -MAX_SAFE..=MAX_SAFE,
        Just(MAX_SAFE),
        Just(-MAX_SAFE),
        -2i64..3
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,6}",
        "[a-z]{0,4}",
        Just("\u{FFFD}\u{1F600}".to_string())
    ]
}

fn non_empty_text() -> impl Strategy<Value = String> {
    "\\PC{1,6}"
}

fn raw_json() -> impl Strategy<Value = RawJson> {
    prop_oneof![
        Just("{}"),
        Just("null"),
        Just("7"),
        Just("\"x\""),
        Just("{ \"b\" : [1, 2.5e3, true] , \"a\":null }"),
        Just("[\"\u{1F600}\"]"),
    ]
    .prop_map(|t| RawJson::new(t).expect("sample JSON parses"))
}

fn scope_map() -> impl Strategy<Value = ScopeMap> {
    btree_map(text(), vec(text(), 0..3), 0..3)
        .prop_map(|m| ScopeMap::from_entries(m).expect("unique keys"))
}

fn unknown_frame() -> impl Strategy<Value = UnknownFrame> {
    let unregistered = (0u8..=255).prop_filter("unregistered type", |t| {
        frames::registered_kind(*t).is_none()
    });
    (unregistered, vec(any::<u8>(), 0..12)).prop_map(|(frame_type, payload)| UnknownFrame {
        frame_type,
        payload,
    })
}

fn version() -> impl Strategy<Value = WireVersion> {
    prop_oneof![
        Just(WireVersion::V1),
        Just(WireVersion::V2),
        Just(WireVersion::V3)
    ]
}

fn push_commit() -> impl Strategy<Value = PushCommit> {
    let op = (
        text(),
        text(),
        proptest::option::of(safe_i64()),
        proptest::option::of(vec(any::<u8>(), 0..10)),
    )
        .prop_map(|(table, row_id, base_version, payload)| PushOperation {
            table,
            row_id,
            base_version,
            op: match payload {
                Some(payload) => PushOp::Upsert { payload },
                None => PushOp::Delete,
            },
        });
    (non_empty_text(), vec(op, 1..4)).prop_map(|(client_commit_id, operations)| PushCommit {
        client_commit_id,
        operations,
    })
}

fn subscription() -> impl Strategy<Value = Subscription> {
    (
        text(),
        text(),
        scope_map(),
        proptest::option::of(raw_json()),
        safe_i64(),
        proptest::option::of(raw_json()),
    )
        .prop_map(
            |(id, table, scopes, params, cursor, bootstrap_state)| Subscription {
                id,
                table,
                scopes,
                params,
                cursor,
                bootstrap_state,
            },
        )
}

/// Inserts unknown frames at positions from `first_allowed` (at least 1:
/// never before the header) to `last_allowed`.
fn with_unknowns<F: Clone + std::fmt::Debug>(
    frames: Vec<F>,
    unknowns: Vec<(usize, UnknownFrame)>,
    wrap: fn(UnknownFrame) -> F,
    first_allowed: usize,
    last_allowed: usize,
) -> Vec<F> {
    let mut frames = frames;
    for (pos, frame) in unknowns {
        let span = (last_allowed.min(frames.len()) + 1).saturating_sub(first_allowed);
        let at = first_allowed + pos % span.max(1);
        frames.insert(at.min(frames.len()), wrap(frame));
    }
    frames
}

fn request() -> impl Strategy<Value = Request> {
    (
        version(),
        non_empty_text(),
        1i32..=i32::MAX,
        proptest::option::of(non_empty_text()),
        vec(push_commit(), 0..3),
        proptest::option::of((
            (any::<i32>(), any::<i32>(), any::<i32>(), 0u8..16),
            vec(subscription(), 0..3),
        )),
        vec((any::<usize>(), unknown_frame()), 0..3),
    )
        .prop_filter(
            "a request pushes or pulls",
            |(_, _, _, _, commits, pull, _)| !commits.is_empty() || pull.is_some(),
        )
        .prop_map(
            |(version, client_id, schema_version, epoch, commits, pull, unknowns)| {
                let header = ReqHeader {
                    client_id,
                    schema_version,
                    log_epoch: if version.has_log_epoch() { epoch } else { None },
                };
                let pull = pull.map(|((a, b, c, accept), subs)| {
                    let pull = PullHeader {
                        limit_commits: a,
                        limit_snapshot_rows: b,
                        max_snapshot_pages: c,
                        accept: Accept::from_bits(accept).expect("low bits only"),
                    };
                    (pull, subs)
                });
                let request = Request::from_parts(version, header, commits, pull);
                let len = request.frames.len();
                Request {
                    wire_version: version,
                    frames: with_unknowns(request.frames, unknowns, RequestFrame::Unknown, 1, len),
                }
            },
        )
}

fn column_value(column: &Column) -> BoxedStrategy<ColumnValue> {
    let value = match column.column_type {
        ColumnType::String => text().prop_map(ColumnValue::String).boxed(),
        ColumnType::Integer => safe_i64().prop_map(ColumnValue::Integer).boxed(),
        ColumnType::Float => any::<u64>()
            .prop_map(|b| ColumnValue::Float(f64::from_bits(b)))
            .boxed(),
        ColumnType::Boolean => any::<bool>().prop_map(ColumnValue::Boolean).boxed(),
        ColumnType::Json => raw_json().prop_map(ColumnValue::Json).boxed(),
        ColumnType::Bytes => vec(any::<u8>(), 0..6).prop_map(ColumnValue::Bytes).boxed(),
        ColumnType::BlobRef => (
            "[0-9a-f]{64}",
            0u64..1000,
            proptest::option::of("[a-z/]{1,8}"),
        )
            .prop_map(|(hex, len, media)| {
                let text = match media {
                    Some(m) => format!(
                        r#"{{"blobId":"sha256:{hex}","byteLength":{len},"mediaType":"{m}"}}"#
                    ),
                    None => format!(r#"{{"blobId":"sha256:{hex}","byteLength":{len}}}"#),
                };
                ColumnValue::BlobRef(RawJson::new(text).expect("blob ref parses"))
            })
            .boxed(),
        ColumnType::Crdt => vec(any::<u8>(), 0..6).prop_map(ColumnValue::Crdt).boxed(),
    };
    if column.nullable {
        prop_oneof![1 => Just(ColumnValue::Null), 3 => value].boxed()
    } else {
        value
    }
}

fn rows_segment() -> impl Strategy<Value = RowsSegment> {
    let column = (text(), 1u8..=8, any::<bool>()).prop_map(|(name, tag, nullable)| Column {
        name,
        column_type: ColumnType::from_tag(tag).expect("tags 1 to 8"),
        nullable,
    });
    (text(), any::<i32>(), vec(column, 0..10)).prop_flat_map(|(table, schema_version, columns)| {
        let row = (
            1..=MAX_SAFE,
            columns.iter().map(column_value).collect::<Vec<_>>(),
        )
            .prop_map(|(server_version, values)| SegmentRow {
                server_version,
                values,
            });
        vec(vec(row, 1..4), 0..3).prop_map(move |blocks| RowsSegment {
            table: table.clone(),
            schema_version,
            columns: columns.clone(),
            blocks,
        })
    })
}

fn details_json() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(r#"{"fieldPaths":["title","meta.tags"]}"#.to_string()),
        Just(r#"{"reason":"too-long","requiredAction":"shorten"}"#.to_string()),
        Just(r#"{"references":{"ticket.id":"T-1"}}"#.to_string()),
    ]
}

fn push_result() -> impl Strategy<Value = Vec<ResponseFrame>> {
    let kind = prop_oneof![
        Just(OpResultKind::Applied),
        (
            text(),
            text(),
            safe_i64(),
            vec(any::<u8>(), 0..6),
            vec(any::<u8>(), 0..3)
        )
            .prop_map(
                |(code, message, server_version, server_row, conflict_columns)| {
                    OpResultKind::Conflict {
                        code,
                        message,
                        server_version,
                        server_row,
                        // Kept at version 3 only (see `for_version`).
                        conflict_columns: Some(conflict_columns),
                    }
                }
            ),
        (text(), text(), any::<bool>()).prop_map(|(code, message, retryable)| {
            OpResultKind::Error {
                code,
                message,
                retryable,
            }
        }),
    ];
    let status = prop_oneof![
        safe_i64().prop_map(|commit_seq| PushStatus::Applied { commit_seq }),
        safe_i64().prop_map(|commit_seq| PushStatus::Cached { commit_seq }),
        Just(PushStatus::Rejected),
    ];
    // Details entries pick among the result's error records (§6.3.1).
    let details = proptest::option::of(vec((any::<prop::sample::Index>(), details_json()), 1..3));
    (text(), status, vec((any::<i32>(), kind), 0..3), details).prop_map(
        |(id, status, results, details)| {
            let results: Vec<OpResult> = results
                .into_iter()
                .map(|(op_index, kind)| OpResult { op_index, kind })
                .collect();
            let error_ops: Vec<i32> = results
                .iter()
                .filter(|r| matches!(r.kind, OpResultKind::Error { .. }))
                .map(|r| r.op_index)
                .collect();
            let completable =
                status == PushStatus::Rejected && !id.is_empty() && !error_ops.is_empty();
            let mut frames = vec![ResponseFrame::PushResult(PushResult {
                client_commit_id: id.clone(),
                status,
                results,
            })];
            if let Some(entries) = details.filter(|_| completable) {
                let mut seen = Vec::new();
                let entries: Vec<DetailEntry> = entries
                    .into_iter()
                    .map(|(pick, details_json)| {
                        (error_ops[pick.index(error_ops.len())], details_json)
                    })
                    .filter(|(i, _)| {
                        if seen.contains(i) {
                            false
                        } else {
                            seen.push(*i);
                            true
                        }
                    })
                    .map(|(op_index, details_json)| DetailEntry {
                        op_index,
                        details_json,
                    })
                    .filter(|e| e.op_index >= 0)
                    .collect();
                if !entries.is_empty() {
                    frames.push(ResponseFrame::PushResultDetails(PushResultDetails {
                        client_commit_id: id,
                        entries,
                    }));
                }
            }
            frames
        },
    )
}

/// A conflict record carries `conflictColumns` at wire version 3 only.
fn for_version(mut frame: ResponseFrame, version: WireVersion) -> ResponseFrame {
    if let ResponseFrame::PushResult(result) = &mut frame {
        for record in &mut result.results {
            if let OpResultKind::Conflict {
                conflict_columns, ..
            } = &mut record.kind
            {
                if !version.has_sparse_rows() {
                    *conflict_columns = None;
                }
            }
        }
    }
    frame
}

fn commit() -> impl Strategy<Value = Commit> {
    (safe_i64(), safe_i64(), text(), vec(text(), 1..3)).prop_flat_map(
        |(commit_seq, created_at_ms, actor_id, tables)| {
            let n = tables.len() as u16;
            let change = (
                0..n,
                text(),
                btree_map(text(), text(), 0..3),
                proptest::option::of((safe_i64(), vec(any::<u8>(), 0..6))),
            )
                .prop_map(|(table_index, row_id, scopes, upsert)| Change {
                    table_index,
                    row_id,
                    scopes: StoredScopes::from_entries(scopes).expect("unique keys"),
                    op: match upsert {
                        Some((row_version, row)) => ChangeOp::Upsert { row_version, row },
                        None => ChangeOp::Delete,
                    },
                });
            vec(change, 0..3).prop_map(move |changes| Commit {
                commit_seq,
                created_at_ms,
                actor_id: actor_id.clone(),
                tables: tables.clone(),
                changes,
            })
        },
    )
}

fn segment_frame() -> impl Strategy<Value = ResponseFrame> {
    let reference = (
        text(),
        any::<bool>(),
        text(),
        (safe_i64(), safe_i64(), safe_i64()),
        text(),
        proptest::option::of(text()),
        proptest::option::of(text()),
        proptest::option::of((text(), safe_i64())),
    )
        .prop_map(
            |(segment_id, rows, table, (byte_length, row_count, as_of), digest, rc, nrc, url)| {
                ResponseFrame::SegmentRef(SegmentRef {
                    segment_id,
                    media_type: if rows {
                        MediaType::Rows
                    } else {
                        MediaType::Sqlite
                    },
                    table,
                    byte_length,
                    row_count,
                    as_of_commit_seq: as_of,
                    scope_digest: digest,
                    row_cursor: rc,
                    next_row_cursor: nrc,
                    url: url.map(|(url, expires_at_ms)| SignedUrl { url, expires_at_ms }),
                })
            },
        );
    let inline = rows_segment().prop_map(|s| {
        ResponseFrame::SegmentInline(
            SegmentInline::from_segment(&s).expect("generated segments encode"),
        )
    });
    prop_oneof![reference, inline]
}

fn section() -> impl Strategy<Value = Vec<ResponseFrame>> {
    let start = (text(), 1u8..=3, text(), scope_map(), any::<bool>()).prop_map(
        |(id, status, reason_code, effective_scopes, bootstrap)| SubStart {
            id,
            status: match status {
                1 => SubStatus::Active,
                2 => SubStatus::Revoked,
                _ => SubStatus::Reset,
            },
            reason_code,
            effective_scopes,
            bootstrap,
        },
    );
    let body = prop_oneof![
        vec(commit().prop_map(ResponseFrame::Commit), 0..3),
        vec(segment_frame(), 0..3),
    ];
    let end = (safe_i64(), proptest::option::of(raw_json())).prop_map(
        |(next_cursor, bootstrap_state)| SubEnd {
            next_cursor,
            bootstrap_state,
        },
    );
    (start, body, end).prop_map(|(start, body, end)| {
        let mut frames = vec![ResponseFrame::SubStart(start)];
        frames.extend(body);
        frames.push(ResponseFrame::SubEnd(end));
        frames
    })
}

fn response() -> impl Strategy<Value = Response> {
    let header = (
        proptest::option::of(any::<i32>()),
        proptest::option::of(any::<i32>()),
        non_empty_text(),
        any::<bool>(),
    );
    let error = (
        text(),
        text(),
        text(),
        any::<bool>(),
        text(),
        proptest::option::of(raw_json()),
    )
        .prop_map(
            |(code, message, category, retryable, recommended_action, details)| ErrorFrame {
                code,
                message,
                category,
                retryable,
                recommended_action,
                details,
            },
        );
    (
        version(),
        header,
        proptest::option::of((non_empty_text(), safe_i64())),
        vec(push_result(), 0..3),
        vec(section(), 0..3),
        proptest::option::of(error),
        vec((any::<usize>(), unknown_frame()), 0..3),
    )
        .prop_map(
            |(version, (req, latest, epoch, reset), lease, pushes, sections, error, unknowns)| {
                let mut frames = vec![ResponseFrame::RespHeader(RespHeader {
                    required_schema_version: req,
                    latest_schema_version: latest,
                    epoch: (version.has_log_epoch()).then_some(ResponseEpoch {
                        log_epoch: epoch,
                        reset_required: reset,
                    }),
                })];
                let has_lease = lease.is_some();
                if let Some((lease_id, expires_at_ms)) = lease {
                    frames.push(ResponseFrame::Lease(Lease {
                        lease_id,
                        expires_at_ms,
                    }));
                }
                frames.extend(
                    pushes
                        .into_iter()
                        .flatten()
                        .map(|frame| for_version(frame, version)),
                );
                frames.extend(sections.into_iter().flatten());
                // Unknown frames anywhere strictly between the header (or
                // the LEASE right after it) and ERROR.
                let first = if has_lease { 2 } else { 1 };
                let len = frames.len();
                let mut frames =
                    with_unknowns(frames, unknowns, ResponseFrame::Unknown, first, len);
                if let Some(error) = error {
                    frames.push(ResponseFrame::Error(error));
                }
                Response {
                    wire_version: version,
                    frames,
                }
            },
        )
}

fn vector_bins() -> Vec<(PathBuf, Vec<u8>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/ssp2-vectors");
    assert!(
        root.join("README.md").is_file(),
        "the SSP2 golden vectors are missing at {}",
        root.display()
    );
    let mut out = Vec::new();
    for kind in ["request", "response", "segment"] {
        let dir = root.join(kind);
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "bin") {
                let bytes =
                    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                out.push((path, bytes));
            }
        }
    }
    assert!(
        out.len() >= 20,
        "expected the valid vectors, found {}",
        out.len()
    );
    out
}

/// Decodes `bytes` as whatever its path says; `Ok(re-encoding)` if accepted.
fn decode_as(path: &Path, bytes: &[u8]) -> Option<Result<Vec<u8>, DecodeError>> {
    let kind = path.parent()?.file_name()?.to_str()?;
    Some(match kind {
        "request" => {
            decode_request(bytes).map(|r| encode_request(&r).expect("decoded requests encode"))
        }
        "response" => {
            decode_response(bytes).map(|r| encode_response(&r).expect("decoded responses encode"))
        }
        "segment" => {
            decode_segment(bytes).map(|s| encode_segment(&s).expect("decoded segments encode"))
        }
        _ => return None,
    })
}

#[test]
fn every_truncation_of_a_valid_vector_is_refused() {
    for (path, bytes) in vector_bins() {
        for len in 0..bytes.len() {
            if let Some(result) = decode_as(&path, &bytes[..len]) {
                assert!(
                    result.is_err(),
                    "{} cut to {len} bytes was accepted",
                    path.display()
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn requests_round_trip(request in request()) {
        let bytes = encode_request(&request).expect("generated requests encode");
        prop_assert_eq!(decode_request(&bytes), Ok(request));
    }

    #[test]
    fn responses_round_trip(response in response()) {
        let bytes = encode_response(&response).expect("generated responses encode");
        prop_assert_eq!(decode_response(&bytes), Ok(response));
    }

    #[test]
    fn segments_round_trip(segment in rows_segment()) {
        let bytes = encode_segment(&segment).expect("generated segments encode");
        prop_assert_eq!(decode_segment(&bytes), Ok(segment));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..256)) {
        let _ = decode_request(&bytes);
        let _ = decode_response(&bytes);
        let _ = decode_segment(&bytes);
        let _ = realtime::parse_control_message(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn arbitrary_frames_after_a_valid_header_never_panic(kind in 1u8..=2, version in 1u8..=3, body in vec(any::<u8>(), 0..256)) {
        let mut bytes = vec![b'S', b'S', b'P', b'2', version, 0, kind, 0];
        bytes.extend_from_slice(&body);
        let _ = decode_request(&bytes);
        let _ = decode_response(&bytes);
    }

    /// Any accepted mutation of a vector re-encodes to exactly its bytes.
    #[test]
    fn mutated_vectors_are_refused_or_canonical(pick in any::<prop::sample::Index>(), edits in vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
        let bins = vector_bins();
        let (path, mut bytes) = bins[pick.index(bins.len())].clone();
        for (at, value) in edits {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if let Some(Ok(reencoded)) = decode_as(&path, &bytes) {
            prop_assert_eq!(reencoded, bytes);
        }
    }

    #[test]
    fn sha256_matches_the_reference_crate(data in vec(any::<u8>(), 0..300)) {
        use sha2::Digest;
        let expected: [u8; 32] = sha2::Sha256::digest(&data).into();
        prop_assert_eq!(sha256::sha256(&data), expected);
    }
}
