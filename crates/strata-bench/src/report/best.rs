//! Marking the best value of each table column in the HTML report: which way a
//! column's metric improves, and which of its cells hold the best value. Shared by the results
//! table and the reads view.

use super::finite;

/// Which way a column's metric improves, for marking its best value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Better {
    /// More is better (throughput).
    Higher,
    /// Less is better (latency, amplification, CPU, memory).
    Lower,
    /// Neither: a measurement that depends on how much work was done (device bytes and reads
    /// per second), or a setting.
    Neither,
}

/// A formatted cell's number ("1,234.5" reads as 1234.5); `None` for "-" and other text.
fn cell_value(cell: &str) -> Option<f64> {
    cell.replace(',', "").parse::<f64>().ok().and_then(finite)
}

/// Which cells of one column hold its best value. Cells compare as shown, so values that round
/// alike tie, and ties are all marked; missing cells never are. A mark has to single runs out:
/// a column with fewer than two values has none, and neither has one where all values are
/// equal, or where three or more values and most of the column tie for best (a column of
/// "0.00"s with a few above).
pub(super) fn best_marks(cells: &[&str], better: Better) -> Vec<bool> {
    let values: Vec<Option<f64>> = cells.iter().map(|c| cell_value(c)).collect();
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    let best = match better {
        Better::Higher => present.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        Better::Lower => present.iter().copied().fold(f64::INFINITY, f64::min),
        Better::Neither => f64::NAN,
    };
    let ties = present.iter().filter(|&&v| v == best).count();
    let singles_out =
        present.len() >= 2 && ties < present.len() && (ties < 3 || 2 * ties <= present.len());
    if best.is_nan() || !singles_out {
        return vec![false; cells.len()];
    }
    values.iter().map(|v| *v == Some(best)).collect()
}

/// Best-value marks for a table (rows of cells, a column per `better` entry), comparing each
/// row only with the rows of its `group` (the phase, in the reads view).
pub(super) fn table_marks<K: PartialEq>(
    rows: &[&[String]],
    better: &[Better],
    group: impl Fn(usize) -> K,
) -> Vec<Vec<bool>> {
    let mut marks = vec![vec![false; better.len()]; rows.len()];
    for first in 0..rows.len() {
        let members: Vec<usize> = (0..rows.len())
            .filter(|&i| group(i) == group(first))
            .collect();
        // Each group once, from its first row.
        if members.first() != Some(&first) {
            continue;
        }
        for (column, &way) in better.iter().enumerate() {
            let cells: Vec<&str> = members
                .iter()
                .map(|&i| rows[i].get(column).map_or("", String::as_str))
                .collect();
            for (&i, mark) in members.iter().zip(best_marks(&cells, way)) {
                marks[i][column] = mark;
            }
        }
    }
    marks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_read_back_as_shown() {
        assert_eq!(cell_value("1,234.5"), Some(1234.5));
        assert_eq!(cell_value("-"), None);
        assert_eq!(cell_value("readrandom"), None);
        assert_eq!(best_marks(&["2", "2"], Better::Higher), [false, false]);
        assert_eq!(best_marks(&["2", "-"], Better::Lower), [false, false]);
        assert_eq!(best_marks(&["1", "2"], Better::Neither), [false, false]);
        // Three of four tie for best: no mark; two of four: both marked.
        let most = ["0.00", "0.00", "0.01", "0.00"];
        assert_eq!(best_marks(&most, Better::Lower), [false; 4]);
        let half = ["0.00", "0.00", "0.01", "0.02"];
        assert_eq!(best_marks(&half, Better::Lower), [true, true, false, false]);
    }
}
