//! How keys sort, where the engines read "binary" apart.

use std::cmp::Ordering;

/// How keys sort: `ListLeases`' order and its `@After`. The contract says
/// binary (`Latin1_General_100_BIN2`), and the engines read that apart
/// where one key continues another with a character below U+0020 (keys
/// never end in a space, so nowhere else).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KeyOrder {
    /// SQL Server's: character by character, the shorter key padded with
    /// spaces ("SQL Server follows the ANSI/ISO SQL-92 specification on how
    /// to compare strings with spaces"), so `"a\t"` sorts before `"a"`.
    #[default]
    Padded,
    /// Babelfish's: by code point alone, so `"a"` sorts before `"a\t"`.
    CodePoint,
}

impl KeyOrder {
    /// The order of keys `a` and `b`.
    pub fn compare(self, a: &str, b: &str) -> Ordering {
        match self {
            KeyOrder::CodePoint => a.cmp(b),
            KeyOrder::Padded => {
                let n = a.chars().count().max(b.chars().count());
                let padded = |s: &str| s.chars().chain(std::iter::repeat(' ')).take(n).collect::<Vec<char>>();
                padded(a).cmp(&padded(b))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_compare_padded_with_spaces_on_sql_server_and_by_code_point_on_babelfish() {
        let padded = |a, b| KeyOrder::Padded.compare(a, b);
        assert_eq!(padded("a", "b"), Ordering::Less);
        assert_eq!(padded("a", "ab"), Ordering::Less);
        assert_eq!(padded("a\t", "a"), Ordering::Less);
        assert_eq!(padded("Job", "job"), Ordering::Less, "binary: upper case first");
        assert_eq!(padded("k", "k"), Ordering::Equal);
        assert_eq!(KeyOrder::CodePoint.compare("a\t", "a"), Ordering::Greater);
        assert_eq!(KeyOrder::CodePoint.compare("a", "ab"), Ordering::Less);
    }
}
