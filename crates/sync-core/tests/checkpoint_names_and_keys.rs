//! Input rules at the edges of their ranges: checkpoint names
//! (`storage-contract.md`: 1..=128 UTF-8 bytes without NUL) and the
//! rendering of key values into row ids and scopes
//! (`schema-and-migrations.md` §3.4).

use sync_core::limits::MAX_CHECKPOINT_NAME_BYTES;
use sync_core::validate::{checkpoint_name, is_valid_checkpoint_name};
use sync_core::RowValue;

#[test]
fn a_checkpoint_name_may_use_every_byte_of_its_limit_and_no_more() {
    let longest = "n".repeat(MAX_CHECKPOINT_NAME_BYTES);
    assert!(checkpoint_name(&longest).is_ok());
    assert!(is_valid_checkpoint_name(&longest));
    // 127 ASCII bytes and one two-byte character: 129 bytes.
    let over = format!("{}é", "n".repeat(MAX_CHECKPOINT_NAME_BYTES - 1));
    let error = checkpoint_name(&over).unwrap_err();
    assert_eq!(error.get_detail("argument"), Some("name"));
    assert!(!is_valid_checkpoint_name(&over));
}

#[test]
fn empty_and_nul_checkpoint_names_are_invalid() {
    for bad in ["", "a\0b"] {
        assert!(checkpoint_name(bad).is_err(), "{bad:?}");
        assert!(!is_valid_checkpoint_name(bad), "{bad:?}");
    }
    assert!(is_valid_checkpoint_name("search_v2"));
}

#[test]
fn key_values_render_as_row_ids_do() {
    let rendered: Vec<Option<String>> = [
        RowValue::String("t1".to_owned()),
        RowValue::Integer(-42),
        RowValue::Boolean(true),
        RowValue::Boolean(false),
        RowValue::Json("{\"a\":1}".to_owned()),
        RowValue::String(String::new()),
        RowValue::Null,
        RowValue::Float(1.5),
    ]
    .iter()
    .map(RowValue::render_key)
    .collect();
    assert_eq!(
        rendered,
        [
            Some("t1".to_owned()),
            Some("-42".to_owned()),
            Some("true".to_owned()),
            Some("false".to_owned()),
            Some("{\"a\":1}".to_owned()),
            None,
            None,
            None,
        ]
    );
}
