//! T-SQL text handling shared by the deploy runner, the audit and the
//! client: one lexer, one splitting on `GO`, one way to quote a name or a
//! string, one fingerprint of a shipped text and one of a definition the
//! server holds. Two copies of any
//! of these would drift apart, and then a name the deploy quotes one way
//! would be read another way by the audit.

// The client needs only the lexer, the applock test, the lock-timeout
// test and the missing-procedure test; the rest serves the deploy runner and the audit (which turns on
// "deploy"), stripping only the audit, and quoting also the bench.
mod applock;
#[cfg(feature = "deploy")]
mod batch;
#[cfg(feature = "deploy")]
mod checksum;
#[cfg(feature = "deploy")]
mod definition_hash;
mod lexer;
mod lock_timeout;
mod missing_procedure;
#[cfg(any(feature = "deploy", feature = "bench"))]
mod quote;
#[cfg(feature = "audit")]
mod strip;

pub(crate) use applock::after_applock;
#[cfg(feature = "deploy")]
pub(crate) use batch::has_separator;
#[cfg(feature = "deploy")]
pub use batch::{BadSeparator, Batch, split_batches};
#[cfg(feature = "deploy")]
pub(crate) use checksum::checksum;
#[cfg(feature = "deploy")]
pub use checksum::normalize;
#[cfg(feature = "audit")]
pub(crate) use definition_hash::same_definition;
#[cfg(feature = "deploy")]
pub(crate) use definition_hash::{definition_hash_sql, hash_hex};
#[cfg(feature = "deploy")]
pub(crate) use lexer::Token;
#[cfg(any(feature = "deploy", feature = "audit"))]
pub(crate) use lexer::TokenKind;
pub(crate) use lexer::tokenize;
pub(crate) use lock_timeout::is_lock_timeout;
pub(crate) use missing_procedure::is_missing_procedure;
#[cfg(any(feature = "deploy", feature = "bench"))]
pub(crate) use quote::literal;
#[cfg(feature = "deploy")]
pub(crate) use quote::{quote_name, quote_qualified};
#[cfg(feature = "audit")]
pub(crate) use strip::{code_in_place, code_only, keywords_in_place, without_comments};
