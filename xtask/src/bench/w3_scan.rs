//! W3 scan: `scan_row_payloads` (the scope scan an engine bootstrap runs,
//! `scan_rows` without the rows' scopes) over the 70 000 rows of W1+W2 in
//! pages of 500 — every list on its own (`lists=1`, 100 scans) and one
//! filter naming all 100 lists (`lists=100`). Rows/s. Ours and raw read
//! the same database: first as loaded (no planner statistics, as a
//! bootstrap right after a bulk load meets it), then, at the end of the
//! run, after `ANALYZE` (`lists=1 analyzed`, `lists=100 analyzed`). Where the reference server
//! has a dialect (SQLite, Postgres), each variant also reads the same
//! filters in the reference's page shapes (`RawClient::scan_reference_shape`:
//! its `IN` list on both, its later `= ANY` array on Postgres) and reports
//! ours against each (`… reference-in`, `… reference-any`). Its `IN` list
//! is read a second time on a copy of the two tables laid out as the
//! reference's release 0.15.48 creates them (`Db::reference_layout_copy`:
//! on Postgres without the by-row scope index its later versions add; on
//! SQLite a rowid scope table): `… reference-in own-layout`.

use anyhow::{bail, Result};
use sync_core::{RowScanQuery, ServerStorage};

use super::db::Db;
use super::fixture::{self, TABLE};
use super::raw::{RawClient, ReferenceShape};
use super::report::{Better, Measure, Sample};
use super::w1_push::PARTITION;
use super::{progress, repeat_for, Scale};

/// Scans one filter from the start through the storage API, as an engine
/// bootstrap does (`scan_row_payloads`: the rows without their scopes), to
/// the end or for at most `max_pages` pages; returns the rows.
pub fn scan_ours(
    storage: &dyn ServerStorage,
    lists: &[String],
    page: i64,
    max_pages: u64,
) -> Result<u64> {
    let mut after: Option<String> = None;
    let mut total = 0u64;
    for _ in 0..max_pages {
        let rows = storage.scan_row_payloads(
            PARTITION,
            &RowScanQuery {
                table: TABLE.to_owned(),
                scope_filter: fixture::filter(lists),
                after_row_id: after.take(),
                limit: page,
            },
        )?;
        total += rows.len() as u64;
        match rows.last() {
            Some(last) if rows.len() as i64 == page => after = Some(last.row_id.clone()),
            _ => return Ok(total),
        }
    }
    Ok(total)
}

/// The lists scanned per variant: every list on its own, or all at once.
fn groups(per_scan: usize) -> Vec<Vec<String>> {
    fixture::all_lists()
        .chunks(per_scan)
        .map(<[String]>::to_vec)
        .collect()
}

fn timed(
    min: std::time::Duration,
    mut scan: impl FnMut(&[String]) -> Result<u64>,
    groups: &[Vec<String>],
) -> Result<(f64, u64)> {
    let (rows, runs, elapsed) = repeat_for(min, || {
        let mut rows = 0;
        for lists in groups {
            rows += scan(lists)?;
        }
        Ok(rows)
    })?;
    Ok((
        f64::from(runs) * rows as f64 / elapsed.as_secs_f64().max(1e-9),
        rows,
    ))
}

/// Both variants, interleaved; with `analyzed`, after `ANALYZE` (which
/// the workloads that read the fixture after W3 would then meet too: run
/// it last).
pub fn run(db: &Db, scale: &Scale, analyzed: bool) -> Result<Vec<Measure>> {
    let storage = db.storage(false)?;
    let mut raw: Box<dyn RawClient> = db.raw()?;
    // The reference's own layout: a copy of the scan tables, made after
    // the fixture is loaded (so as loaded as the original).
    let copy = db.reference_layout_copy()?;
    let mut own: Option<Box<dyn RawClient>> = copy.as_ref().map(Db::raw).transpose()?;
    if analyzed {
        raw.analyze()?;
        if let Some(own) = own.as_mut() {
            own.analyze()?;
        }
    }
    let suffix = if analyzed { " analyzed" } else { "" };
    let mut out = Vec::new();
    for (base, per_scan) in [("lists=1", 1usize), ("lists=100", fixture::LISTS as usize)] {
        let variant = format!("{base}{suffix}");
        let variant = variant.as_str();
        let groups = groups(per_scan);
        let mut samples = Vec::new();
        // One page tells which of the reference's shapes this dialect has:
        // each on this storage's layout, and its `IN` list on its own.
        let mut shapes: Vec<(Reader, Vec<Sample>)> = Vec::new();
        if let Some(first) = groups.first() {
            let own_reader = own.is_some().then_some(Reader::OwnLayout);
            for reader in ReferenceShape::ALL
                .map(Reader::OurLayout)
                .into_iter()
                .chain(own_reader)
            {
                let client = reader.client(&mut raw, &mut own)?;
                if client
                    .scan_reference_shape(reader.shape(), PARTITION, first, scale.page, 1)?
                    .is_some()
                {
                    shapes.push((reader, Vec::new()));
                }
            }
        }
        for round in 0..scale.rounds {
            // Who reads first alternates by round: the first reader of a
            // round may meet work the second does not (hint bits, pruning,
            // a cache the other filled).
            let ours_read = || {
                timed(
                    scale.min_read,
                    |l| scan_ours(storage.as_ref(), l, scale.page, u64::MAX),
                    &groups,
                )
            };
            let mut raw_read = || {
                timed(
                    scale.min_read,
                    |l| raw.scan(PARTITION, l, scale.page, u64::MAX),
                    &groups,
                )
            };
            let ((ours, ours_rows), (raw_rate, raw_rows)) = if round % 2 == 0 {
                let ours = ours_read()?;
                (ours, raw_read()?)
            } else {
                let raw = raw_read()?;
                (ours_read()?, raw)
            };
            if ours_rows != raw_rows || ours_rows != scale.fixture_rows() {
                bail!(
                    "W3 {variant}: ours read {ours_rows} rows, raw {raw_rows}, expected {}",
                    scale.fixture_rows()
                );
            }
            progress(
                db.dialect,
                &format!("W3 {variant} round {}/{}", round + 1, scale.rounds),
                &format!("ours {ours:.0} raw {raw_rate:.0} rows/s"),
            );
            samples.push(Sample {
                ours,
                raw: Some(raw_rate),
            });
            // The reference's shapes, read after both (their rows checked
            // the same way); ours of this round is their comparison.
            for (reader, shape_samples) in &mut shapes {
                let reader = *reader;
                let client = reader.client(&mut raw, &mut own)?;
                let (rate, rows) = timed(
                    scale.min_read,
                    |l| {
                        Ok(client
                            .scan_reference_shape(
                                reader.shape(),
                                PARTITION,
                                l,
                                scale.page,
                                u64::MAX,
                            )?
                            .unwrap_or(0))
                    },
                    &groups,
                )?;
                if rows != scale.fixture_rows() {
                    bail!(
                        "W3 {variant}: the reference's {} read {rows} rows, expected {}",
                        reader.label(),
                        scale.fixture_rows()
                    );
                }
                progress(
                    db.dialect,
                    &format!(
                        "W3 {variant} {} {}/{}",
                        reader.label(),
                        round + 1,
                        scale.rounds
                    ),
                    &format!("{rate:.0} rows/s"),
                );
                shape_samples.push(Sample {
                    ours,
                    raw: Some(rate),
                });
            }
        }
        out.push(Measure::from_samples(
            "W3",
            variant,
            db.dialect,
            "rows/s",
            Better::Higher,
            samples,
        ));
        for (reader, shape_samples) in shapes {
            out.push(Measure::from_samples(
                "W3",
                format!("{base} {}{suffix}", reader.label()),
                db.dialect,
                "rows/s",
                Better::Higher,
                shape_samples,
            ));
        }
    }
    Ok(out)
}

/// Who reads a reference shape: the raw client on this storage's layout,
/// or a raw client on the copy laid out as the reference's release
/// 0.15.48 lays it out (its `IN` list).
#[derive(Debug, Clone, Copy)]
enum Reader {
    OurLayout(ReferenceShape),
    OwnLayout,
}

impl Reader {
    fn shape(self) -> ReferenceShape {
        match self {
            Reader::OurLayout(shape) => shape,
            Reader::OwnLayout => ReferenceShape::InList,
        }
    }

    /// The variant suffix of this reader's rows.
    fn label(self) -> String {
        match self {
            Reader::OurLayout(shape) => shape.label().to_owned(),
            Reader::OwnLayout => format!("{} own-layout", ReferenceShape::InList.label()),
        }
    }

    fn client<'c>(
        self,
        raw: &'c mut Box<dyn RawClient>,
        own: &'c mut Option<Box<dyn RawClient>>,
    ) -> Result<&'c mut Box<dyn RawClient>> {
        match self {
            Reader::OurLayout(_) => Ok(raw),
            Reader::OwnLayout => own
                .as_mut()
                .ok_or_else(|| anyhow::anyhow!("W3: no copy in the reference's layout")),
        }
    }
}
