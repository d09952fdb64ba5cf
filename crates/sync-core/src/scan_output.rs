//! What a scope scan builds of each candidate that passes its filter
//! (`storage-contract.md` §4.7 step 3): a dialect writes its scan once,
//! generic over [`ScanOutput`], and serves both `scan_rows` ([`StoredRow`])
//! and `scan_row_payloads` ([`ScannedRow`]).

use crate::error::Result;
use crate::rows::{ScannedRow, StoredRow};
use crate::scope::{FilterMatcher, StoredScopes};

/// One verified scan row, built from a candidate's columns.
pub trait ScanOutput: Sized {
    /// The row a candidate becomes when its stored scopes (`scopes`, the
    /// stored map's text) satisfy `matcher`; `Ok(None)` when they do not.
    /// `parse` is the dialect's reading of a stored map, used wherever the
    /// map itself is needed; its error (a corrupt map) is the scan's error,
    /// whichever output is built.
    fn verified(
        matcher: &FilterMatcher<'_>,
        row_id: &str,
        server_version: i64,
        scopes: &str,
        payload: Vec<u8>,
        parse: fn(&str) -> Result<StoredScopes>,
    ) -> Result<Option<Self>>;
}

impl ScanOutput for StoredRow {
    /// Parses the map and checks it.
    fn verified(
        matcher: &FilterMatcher<'_>,
        row_id: &str,
        server_version: i64,
        scopes: &str,
        payload: Vec<u8>,
        parse: fn(&str) -> Result<StoredScopes>,
    ) -> Result<Option<Self>> {
        let scopes = parse(scopes)?;
        Ok(matcher.matches(&scopes).then(|| StoredRow {
            row_id: row_id.to_owned(),
            server_version,
            scopes,
            payload,
            column_versions: None,
        }))
    }
}

impl ScanOutput for ScannedRow {
    /// Checks the map's text where it is canonical
    /// ([`FilterMatcher::matches_text`]); any other text goes the
    /// [`StoredRow`] way, through the dialect's reading.
    fn verified(
        matcher: &FilterMatcher<'_>,
        row_id: &str,
        server_version: i64,
        scopes: &str,
        payload: Vec<u8>,
        parse: fn(&str) -> Result<StoredScopes>,
    ) -> Result<Option<Self>> {
        match matcher.matches_text(scopes) {
            Some(matches) => Ok(matches.then(|| ScannedRow {
                row_id: row_id.to_owned(),
                server_version,
                payload,
            })),
            None => {
                let row =
                    StoredRow::verified(matcher, row_id, server_version, scopes, payload, parse);
                Ok(row?.map(ScannedRow::from))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Error, ErrorCode};
    use crate::scope::{parse_canonical_scopes, ScopeFilter};

    /// A dialect's reading: canonical maps, numbers as text, else corrupt.
    fn lenient(text: &str) -> Result<StoredScopes> {
        if let Some(scopes) = parse_canonical_scopes(text) {
            return Ok(scopes);
        }
        match text {
            r#"{"a":1}"# => Ok([("a".to_owned(), "1".to_owned())].into()),
            _ => Err(Error::new(ErrorCode::Backend)),
        }
    }

    #[test]
    fn both_outputs_keep_the_same_candidates() {
        let filter: ScopeFilter = [("a".to_owned(), vec!["1".to_owned()])].into();
        let matcher = FilterMatcher::new(&filter);
        for (text, kept) in [
            (r#"{"a":"1","b":"2"}"#, Some(true)),
            (r#"{"a":"2"}"#, Some(false)),
            // Not canonical: the dialect's reading decides.
            (r#"{"a":1}"#, Some(true)),
            (r#"{"a":"1","a":"2"}"#, Some(false)),
            ("corrupt", None),
        ] {
            let full = StoredRow::verified(&matcher, "r1", 3, text, vec![7], lenient);
            let light = ScannedRow::verified(&matcher, "r1", 3, text, vec![7], lenient);
            match kept {
                Some(kept) => {
                    let full = full.unwrap();
                    assert_eq!(full.is_some(), kept, "{text}");
                    assert_eq!(light.unwrap(), full.map(ScannedRow::from), "{text}");
                }
                None => {
                    assert!(full.is_err() && light.is_err(), "{text}");
                }
            }
        }
    }
}
