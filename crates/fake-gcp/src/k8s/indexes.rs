//! Sets of completion indexes as an Indexed Job's status writes them
//! (`status.completedIndexes`, `status.failedIndexes`): ordered, merged
//! intervals printed as `"1,3-5,7"` (two neighbours as `"1,2"`, a run of
//! three or more as `"3-5"`), as `pkg/controller/job/indexed_job_utils.go`
//! keeps them, so a Job of 100,000 indexes costs a few intervals.

use std::fmt;

/// Ordered, disjoint, non-adjacent intervals `(first, last)` of indexes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Intervals(Vec<(usize, usize)>);

impl Intervals {
    /// Parse a status string, keeping the indexes below `completions`;
    /// a malformed interval is skipped (as the controller does).
    pub(crate) fn parse(text: &str, completions: usize) -> Self {
        let mut out = Intervals::default();
        if text.is_empty() {
            return out;
        }
        for part in text.split(',') {
            let mut ends = part.splitn(2, '-');
            let Some(Ok(first)) = ends.next().map(str::parse::<usize>) else {
                continue;
            };
            if first >= completions {
                break;
            }
            let last = match ends.next() {
                Some(l) => match l.parse::<usize>() {
                    Ok(l) => l.min(completions - 1),
                    Err(_) => continue,
                },
                None => first,
            };
            out.push(first, last);
        }
        out
    }

    /// Append an interval that starts after the last one's start.
    fn push(&mut self, first: usize, last: usize) {
        match self.0.last_mut() {
            Some(prev) if first <= prev.1 + 1 => prev.1 = prev.1.max(last),
            _ => self.0.push((first, last)),
        }
    }

    /// These indexes and `more` (in any order, repeats allowed).
    pub(crate) fn with(&self, more: impl IntoIterator<Item = usize>) -> Self {
        let mut added: Vec<usize> = more.into_iter().collect();
        added.sort_unstable();
        added.dedup();
        let mut all: Vec<(usize, usize)> = self.0.clone();
        all.extend(added.into_iter().map(|i| (i, i)));
        all.sort_unstable();
        let mut out = Intervals::default();
        for (first, last) in all {
            out.push(first, last);
        }
        out
    }

    /// How many indexes.
    pub(crate) fn total(&self) -> usize {
        self.0.iter().map(|(f, l)| l - f + 1).sum()
    }

    /// Whether `index` is in the set.
    pub(crate) fn has(&self, index: usize) -> bool {
        let at = self.0.partition_point(|(_, last)| *last < index);
        self.0.get(at).is_some_and(|(first, _)| *first <= index)
    }

    /// The lowest `count` indexes below `completions` in neither set.
    pub(crate) fn first_missing(
        &self,
        other: &Intervals,
        count: usize,
        completions: usize,
    ) -> Vec<usize> {
        let taken = self.merged(other);
        let mut out = Vec::with_capacity(count.min(completions));
        let mut candidate = 0;
        for (first, last) in &taken.0 {
            while candidate < completions && out.len() < count && candidate < *first {
                out.push(candidate);
                candidate += 1;
            }
            candidate = candidate.max(last + 1);
        }
        while candidate < completions && out.len() < count {
            out.push(candidate);
            candidate += 1;
        }
        out
    }

    /// The union of two sets.
    pub(crate) fn merged(&self, other: &Intervals) -> Self {
        let mut all: Vec<(usize, usize)> = self.0.iter().chain(&other.0).copied().collect();
        all.sort_unstable();
        let mut out = Intervals::default();
        for (first, last) in all {
            out.push(first, last);
        }
        out
    }
}

impl fmt::Display for Intervals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, (first, last)) in self.0.iter().enumerate() {
            if n > 0 {
                f.write_str(",")?;
            }
            write!(f, "{first}")?;
            if last == &(first + 1) {
                write!(f, ",{last}")?;
            } else if last > first {
                write!(f, "-{last}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Intervals;

    #[test]
    fn prints_runs_pairs_and_singles_as_the_controller_does() {
        let set = Intervals::default().with([7, 1, 4, 3, 5, 9, 10]);
        assert_eq!(set.to_string(), "1,3-5,7,9,10");
        assert_eq!(set.total(), 7);
        assert!(set.has(4) && set.has(10) && !set.has(2) && !set.has(8));
        assert_eq!(Intervals::default().to_string(), "");
    }

    #[test]
    fn parses_its_own_output_and_bounds_it_by_completions() {
        let set = Intervals::parse("1,3-5,7,9,10", 100);
        assert_eq!(set.to_string(), "1,3-5,7,9,10");
        assert_eq!(Intervals::parse("0-9,12", 5).to_string(), "0-4");
        assert_eq!(Intervals::parse("x,2", 5).to_string(), "2");
        assert_eq!(Intervals::parse("", 5).total(), 0);
        // Adding to a parsed set merges neighbours.
        assert_eq!(set.with([2, 6, 8]).to_string(), "1-10");
    }

    #[test]
    fn first_missing_skips_both_sets_lowest_first() {
        let done = Intervals::default().with([0, 2, 3]);
        let busy = Intervals::default().with([5]);
        assert_eq!(done.first_missing(&busy, 3, 10), vec![1, 4, 6]);
        assert_eq!(done.first_missing(&busy, 10, 7), vec![1, 4, 6]);
        assert!(done.first_missing(&busy, 0, 7).is_empty());
    }
}
