//! Synonyms ("Synonyms (Database Engine)"): a synonym stands for its base
//! object, a table or a procedure alike, and a statement through it acts on
//! that object.

use super::super::catalog::{Object, ObjectKind};
use super::super::module_text::normalized;
use super::super::rules::Context;
use crate::tsql::code_only;

/// The synonyms whose base object is `target`, by two parts or by three
/// naming this database.
pub(super) fn synonyms_for<'a>(ctx: &Context<'a>, target: &str) -> impl Iterator<Item = &'a Object> {
    let target = normalized(target);
    let here = format!("{}.{target}", normalized(&ctx.catalog.database));
    ctx.catalog.objects.iter().filter(move |s| {
        s.kind == ObjectKind::Synonym
            && s.definition.as_deref().is_some_and(|d| {
                let base = normalized(&code_only(d));
                base == target || base == here
            })
    })
}
