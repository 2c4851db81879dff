//! A set of small numbers as bits: the principals of a session and the
//! memberships dropped are asked about for every candidate drop of every
//! round, and a bit is read where a set of names would be searched.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Bits(Vec<u64>);

impl Bits {
    /// An empty set that holds numbers below `size` without growing.
    pub(super) fn with_size(size: usize) -> Bits {
        Bits(vec![0; size.div_ceil(64)])
    }

    /// Adds `n`; whether it was new.
    pub(super) fn insert(&mut self, n: usize) -> bool {
        let (word, bit) = (n / 64, 1u64 << (n % 64));
        if word >= self.0.len() {
            self.0.resize(word + 1, 0);
        }
        let new = self.0[word] & bit == 0;
        self.0[word] |= bit;
        new
    }

    pub(super) fn contains(&self, n: usize) -> bool {
        self.0.get(n / 64).is_some_and(|w| w & (1u64 << (n % 64)) != 0)
    }

    /// The numbers in the set, smallest first.
    pub(super) fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0
            .iter()
            .enumerate()
            .flat_map(|(i, &w)| (0..64).filter(move |b| w & (1u64 << b) != 0).map(move |b| i * 64 + b))
    }
}

#[cfg(test)]
mod tests {
    use super::Bits;

    #[test]
    fn holds_what_was_inserted_past_its_first_size_in_order() {
        let mut b = Bits::with_size(3);
        assert!(b.insert(130));
        assert!(b.insert(2));
        assert!(!b.insert(2));
        assert!(b.contains(130) && b.contains(2) && !b.contains(64));
        assert_eq!(b.iter().collect::<Vec<_>>(), vec![2, 130]);
    }
}
