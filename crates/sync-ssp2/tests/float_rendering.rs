//! The §11 rendering of float column values: the number JavaScript's JSON
//! would carry, holding exactly the value on the wire.

use proptest::prelude::*;
use serde_json::{json, Value};
use sync_ssp2::render::render_segment;
use sync_ssp2::{Column, ColumnType, ColumnValue, RowsSegment, SegmentRow};

/// The rendering of one float column value.
fn rendered(f: f64) -> Value {
    let segment = RowsSegment {
        table: "t".into(),
        schema_version: 1,
        columns: vec![Column {
            name: "x".into(),
            column_type: ColumnType::Float,
            nullable: false,
        }],
        blocks: vec![vec![SegmentRow {
            server_version: 1,
            values: vec![ColumnValue::Float(f)],
        }]],
    };
    render_segment(&segment)["blocks"][0][0]["values"]["x"].clone()
}

#[test]
fn a_float_whose_text_the_default_parser_misreads_keeps_its_bits() {
    // Its shortest text, -258800350705.54602, read back by a parser that
    // does not round-trip, is the neighbouring double.
    let f = -258_800_350_705.546_02_f64;
    let value = rendered(f);
    assert_eq!(value.as_f64().map(f64::to_bits), Some(f.to_bits()));
    assert_eq!(value.to_string(), "-258800350705.54602");
}

#[test]
fn integral_floats_render_as_integers_and_the_rest_as_null() {
    assert_eq!(rendered(3.0), json!(3));
    assert_eq!(rendered(-0.0), json!(0));
    assert_eq!(rendered(1e20).as_f64(), Some(1e20));
    assert_eq!(rendered(1e21).as_f64(), Some(1e21));
    assert_eq!(rendered(f64::NAN), Value::Null);
    assert_eq!(rendered(f64::NEG_INFINITY), Value::Null);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 4096,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_finite_float_renders_as_its_own_value(bits in any::<u64>()) {
        let f = f64::from_bits(bits);
        prop_assume!(f.is_finite());
        let value = rendered(f);
        let back = value.as_f64().expect("a finite float renders as a number");
        // -0 renders as 0: JSON has one zero.
        let expected = if f == 0.0 { 0.0 } else { f };
        prop_assert_eq!(back.to_bits(), expected.to_bits(), "{} rendered as {}", f, value);
    }
}
