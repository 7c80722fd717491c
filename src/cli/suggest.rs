//! "did you mean ...?": the closest known word by edit distance, for mistyped commands,
//! options and server names.

/// The candidate closest to `word`, when it is close enough to be a likely typo: at most
/// one edit for short words, two for longer ones, and never the word itself.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = if word.chars().count() <= 4 { 1 } else { 2 };
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| (distance(word, c), c))
        .filter(|(d, c)| *d <= limit || c.starts_with(word) && word.len() >= 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// ` (did you mean X?)`, or nothing.
pub fn hint<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, candidates).map(|c| format!(" (did you mean {c}?)")).unwrap_or_default()
}

/// Damerau-Levenshtein distance (optimal string alignment): insertions, deletions,
/// substitutions and swaps of neighbours each count one.
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_word() {
        assert_eq!(distance("cal", "call"), 1);
        assert_eq!(distance("lsit", "list"), 1);
        assert_eq!(closest("cal", ["list", "show", "call"]), Some("call"));
        assert_eq!(closest("jsn", ["json", "jsonl"]), Some("json"));
        assert_eq!(closest("statsu", ["status", "doctor"]), Some("status"));
        assert_eq!(closest("frobnicate", ["list", "tool"]), None);
        assert_eq!(closest("list", ["list"]), None);
        assert_eq!(closest("reso", ["resource", "remove"]), Some("resource"));
    }
}
