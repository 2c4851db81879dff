//! A test helper: an error's message must not repeat its cause, which is its
//! `source` and is printed after it when the chain is rendered.

/// Walks `error`'s chain and panics where a message holds its source's text.
pub(crate) fn assert_each_cause_said_once(error: &(dyn std::error::Error + 'static)) {
    let mut outer = error;
    while let Some(source) = outer.source() {
        let (text, cause) = (outer.to_string(), source.to_string());
        assert!(
            !text.contains(&cause),
            "{text:?} repeats its source {cause:?}, which the chain prints after it"
        );
        outer = source;
    }
}
