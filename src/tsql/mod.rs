//! T-SQL text handling shared by the deploy runner, the audit and the
//! client: one lexer, one splitting on `GO`, one way to quote a name or a
//! string, one fingerprint of a shipped text and one of a definition the
//! server holds. Two copies of any
//! of these would drift apart, and then a name the deploy quotes one way
//! would be read another way by the audit.

mod applock;
mod batch;
mod checksum;
mod definition_hash;
mod lexer;
mod lock_timeout;
mod quote;
mod strip;

pub(crate) use applock::after_applock;
pub(crate) use batch::has_separator;
pub use batch::{BadSeparator, Batch, split_batches};
pub(crate) use checksum::checksum;
pub use checksum::normalize;
pub(crate) use definition_hash::{definition_hash_sql, hash_hex, same_definition};
pub(crate) use lexer::{Token, TokenKind, tokenize};
pub(crate) use lock_timeout::is_lock_timeout;
pub(crate) use quote::{literal, quote_name, quote_qualified};
pub(crate) use strip::{code_only, without_comments};
