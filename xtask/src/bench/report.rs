//! Results: medians over interleaved rounds, the printed table and the JSON
//! document pinned by the issue:
//! `{"machine": {…}, "results": [{"workload", "variant", "dialect", "ours",
//! "raw", "ratio", "unit", "samples"}]}`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::db::Dialect;

/// Whether a bigger number is better (rates) or worse (times).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// Rates: ratio = ours / raw.
    Higher,
    /// Times: ratio = raw / ours.
    Lower,
    /// Overheads, memory, counts: no ratio.
    NoRatio,
}

/// One round: ours and (when there is one) the raw baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub ours: f64,
    pub raw: Option<f64>,
}

/// One result row.
#[derive(Debug, Clone, PartialEq)]
pub struct Measure {
    pub workload: &'static str,
    pub variant: String,
    pub dialect: Dialect,
    pub ours: f64,
    pub raw: Option<f64>,
    /// Relative speed of ours, 1.0 = as fast as raw (median of the per-round ratios).
    pub ratio: Option<f64>,
    pub unit: &'static str,
    pub samples: Vec<Sample>,
}

impl Measure {
    /// A result from interleaved rounds.
    pub fn from_samples(
        workload: &'static str,
        variant: impl Into<String>,
        dialect: Dialect,
        unit: &'static str,
        better: Better,
        samples: Vec<Sample>,
    ) -> Self {
        let ours = median(samples.iter().map(|s| s.ours).collect());
        let raws: Vec<f64> = samples.iter().filter_map(|s| s.raw).collect();
        let raw = (!raws.is_empty()).then(|| median(raws));
        let ratios: Vec<f64> = samples
            .iter()
            .filter_map(|s| {
                let raw = s.raw?;
                match better {
                    Better::Higher if raw > 0.0 => Some(s.ours / raw),
                    Better::Lower if s.ours > 0.0 => Some(raw / s.ours),
                    _ => None,
                }
            })
            .collect();
        let ratio = (!ratios.is_empty()).then(|| median(ratios));
        Self {
            workload,
            variant: variant.into(),
            dialect,
            ours,
            raw,
            ratio,
            unit,
            samples,
        }
    }

    /// The JSON object of this result.
    pub fn to_json(&self) -> Value {
        json!({
            "workload": self.workload,
            "variant": self.variant,
            "dialect": self.dialect.name(),
            "ours": round(self.ours),
            "raw": self.raw.map(round),
            "ratio": self.ratio.map(|r| (r * 1000.0).round() / 1000.0),
            "unit": self.unit,
            "samples": self.samples.iter().map(|s| json!({"ours": round(s.ours), "raw": s.raw.map(round)})).collect::<Vec<_>>(),
        })
    }
}

/// Median (mean of the two middle values for an even count); 0 for none.
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// The `q`-quantile (0..=1, nearest rank) of unsorted values; 0 for none.
pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let rank = (q * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

fn round(value: f64) -> f64 {
    if value.abs() >= 100.0 {
        value.round()
    } else {
        (value * 100.0).round() / 100.0
    }
}

fn number(value: f64) -> String {
    if value.abs() >= 1000.0 {
        let whole = value.round() as i64;
        let text = whole.abs().to_string();
        let mut grouped = String::new();
        for (i, c) in text.chars().enumerate() {
            if i > 0 && (text.len() - i) % 3 == 0 {
                grouped.push(' ');
            }
            grouped.push(c);
        }
        if whole < 0 {
            format!("-{grouped}")
        } else {
            grouped
        }
    } else if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// The printed table (plain text, aligned).
pub fn table(results: &[Measure]) -> String {
    let header = [
        "workload", "variant", "dialect", "ours", "raw", "ratio", "unit",
    ];
    let rows: Vec<[String; 7]> = results
        .iter()
        .map(|m| {
            [
                m.workload.to_owned(),
                m.variant.clone(),
                m.dialect.name().to_owned(),
                number(m.ours),
                m.raw.map_or_else(|| "—".to_owned(), number),
                m.ratio
                    .map_or_else(|| "—".to_owned(), |r| format!("{r:.2}")),
                m.unit.to_owned(),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: &[String], out: &mut String| {
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            let pad = w - cell.chars().count();
            // Numbers right-aligned, text left-aligned.
            if (3..=5).contains(&i) {
                let _ = write!(out, "{}{cell}  ", " ".repeat(pad));
            } else {
                let _ = write!(out, "{cell}{}  ", " ".repeat(pad));
            }
        }
        out.truncate(out.trim_end().len());
        out.push('\n');
    };
    line(&header.map(str::to_owned), &mut out);
    line(&widths.map(|w| "-".repeat(w)), &mut out);
    for row in &rows {
        line(row, &mut out);
    }
    out
}

/// The same table as Markdown (for docs/benchmarks.md).
pub fn markdown(results: &[Measure]) -> String {
    let mut out = String::from(
        "| workload | variant | dialect | ours | raw | ratio | unit |\n|---|---|---|---:|---:|---:|---|\n",
    );
    for m in results {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            m.workload,
            m.variant,
            m.dialect.name(),
            number(m.ours),
            m.raw.map_or_else(|| "—".to_owned(), number),
            m.ratio
                .map_or_else(|| "—".to_owned(), |r| format!("{r:.2}")),
            m.unit
        );
    }
    out
}

/// Writes `{"machine": …, "results": […]}`.
pub fn write_json(path: &Path, machine: Value, results: &[Measure]) -> Result<()> {
    let doc = json!({
        "machine": machine,
        "results": results.iter().map(Measure::to_json).collect::<Vec<_>>(),
    });
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(&doc)? + "\n")
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_ratios() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        let m = Measure::from_samples(
            "W1",
            "default",
            Dialect::Sqlite,
            "commits/s",
            Better::Higher,
            vec![
                Sample {
                    ours: 50.0,
                    raw: Some(100.0),
                },
                Sample {
                    ours: 60.0,
                    raw: Some(100.0),
                },
                Sample {
                    ours: 90.0,
                    raw: Some(100.0),
                },
            ],
        );
        assert_eq!(m.ratio, Some(0.6));
        let t = Measure::from_samples(
            "W7",
            "log=10000",
            Dialect::Sqlite,
            "µs/commit",
            Better::Lower,
            vec![Sample {
                ours: 20.0,
                raw: Some(10.0),
            }],
        );
        assert_eq!(t.ratio, Some(0.5));
        let json = t.to_json();
        for key in [
            "workload", "variant", "dialect", "ours", "raw", "ratio", "unit", "samples",
        ] {
            assert!(json.get(key).is_some(), "{key}");
        }
        let mut values = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(quantile(&mut values, 0.5), 3.0);
        assert_eq!(quantile(&mut values, 0.99), 5.0);
    }
}
