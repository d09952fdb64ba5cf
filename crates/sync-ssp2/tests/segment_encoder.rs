//! `SegmentEncoder`: rows already in the row codec give the bytes
//! `encode_segment` gives for the same values, in blocks of at most
//! `TARGET_BLOCK_ROWS` rows; rows that do not fit are refused.

use sync_ssp2::segment::TARGET_BLOCK_ROWS;
use sync_ssp2::{
    decode_segment, encode_segment, Column, ColumnType, ColumnValue, RowsSegment, SegmentEncoder,
    SegmentRow,
};

fn columns() -> Vec<Column> {
    vec![
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
    ]
}

fn row(i: usize) -> SegmentRow {
    SegmentRow {
        server_version: i64::try_from(i).unwrap() + 1,
        values: vec![
            ColumnValue::String(format!("row-{i:05}")),
            if i % 3 == 0 {
                ColumnValue::Null
            } else {
                ColumnValue::Integer(i64::try_from(i).unwrap())
            },
        ],
    }
}

/// The row-codec bytes of one row, cut out of a one-row segment.
fn row_bytes(r: &SegmentRow) -> Vec<u8> {
    let whole = encode_segment(&RowsSegment {
        table: "t".into(),
        schema_version: 1,
        columns: columns(),
        blocks: vec![vec![r.clone()]],
    })
    .unwrap();
    let empty = encode_segment(&RowsSegment {
        table: "t".into(),
        schema_version: 1,
        columns: columns(),
        blocks: vec![],
    })
    .unwrap();
    // header, rowCount u32, byteLength u32, serverVersion i64, row…, end u32
    let start = empty.len() - 4 + 8 + 8;
    whole[start..whole.len() - 4].to_vec()
}

#[test]
fn encoder_bytes_equal_encode_segment_in_target_blocks() {
    let rows: Vec<SegmentRow> = (0..TARGET_BLOCK_ROWS + 5).map(row).collect();
    let mut encoder = SegmentEncoder::new("t", 1, columns()).unwrap();
    for r in &rows {
        encoder.push_row(r.server_version, &row_bytes(r)).unwrap();
    }
    assert_eq!(encoder.row_count(), rows.len());
    let bytes = encoder.finish().unwrap();
    let expected = encode_segment(&RowsSegment {
        table: "t".into(),
        schema_version: 1,
        columns: columns(),
        blocks: vec![
            rows[..TARGET_BLOCK_ROWS].to_vec(),
            rows[TARGET_BLOCK_ROWS..].to_vec(),
        ],
    })
    .unwrap();
    assert_eq!(bytes.as_bytes(), expected);
    assert_eq!(decode_segment(bytes.as_bytes()).unwrap().blocks.len(), 2);
    // Inline without a second decode, the same bytes and the same rows.
    assert_eq!(bytes.row_count(), rows.len());
    let inline = bytes.into_inline();
    assert_eq!(inline.as_bytes(), expected);
    assert_eq!(inline.row_count(), rows.len());
    let reread = sync_ssp2::SegmentInline::from_bytes(expected.clone()).unwrap();
    assert_eq!(reread, inline);
    assert_eq!(inline.segment().unwrap().blocks.concat(), rows);
}

#[test]
fn an_empty_encoder_gives_a_segment_without_blocks() {
    let bytes = SegmentEncoder::new("t", 1, columns())
        .unwrap()
        .finish()
        .unwrap();
    assert!(decode_segment(bytes.as_bytes()).unwrap().blocks.is_empty());
}

#[test]
fn rows_that_do_not_fit_or_low_versions_are_refused() {
    let mut encoder = SegmentEncoder::new("t", 1, columns()).unwrap();
    let good = row_bytes(&row(1));
    assert!(encoder.push_row(0, &good).is_err());
    assert!(encoder.push_row(1, &good[..good.len() - 1]).is_err());
    let mut longer = good.clone();
    longer.push(0);
    assert!(encoder.push_row(1, &longer).is_err());
    assert_eq!(encoder.row_count(), 0);
    encoder.push_row(1, &good).unwrap();
    assert_eq!(encoder.row_count(), 1);
}
