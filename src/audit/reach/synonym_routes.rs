//! Rights granted on a synonym for code that reaches the fence ("Synonyms
//! (Database Engine)": a statement through a synonym is checked on the
//! synonym; "Ownership Chains": its base object, of the same owner, is not
//! checked at all). EXECUTE on a synonym for a procedure that writes a fence
//! table, or INSERT, UPDATE or DELETE on one for a view or inline function
//! written through (or a table whose trigger writes one), starts that code
//! as the same right on the object would: [`super::code`] and
//! [`super::writers`] weigh each way to an object here beside the object
//! itself. A synonym of another owner breaks the chain, and the object's
//! own grants decide.

use super::super::catalog::{Object, ObjectKind, Securable};
use super::super::rules::Context;
use super::principals::hierarchy_note;
use super::right::Right;
use super::synonyms::synonyms_for;

/// How a right may name `o`: `o` itself, then each synonym for it that has
/// its owner, on an engine that chains ownership (a right on the synonym is
/// checked there, and `o` not at all).
pub(super) fn ways_to<'a>(ctx: &Context<'a>, o: &'a Object) -> Vec<&'a Object> {
    let mut out = vec![o];
    if !ctx.catalog.engine.chains_ownership || o.kind == ObjectKind::Synonym {
        return out;
    }
    let Some(owner) = ctx.catalog.owner_of(o) else {
        return out;
    };
    out.extend(
        synonyms_for(ctx, &o.qualified_name())
            .filter(|s| ctx.catalog.owner_of(s).is_some_and(|x| x.eq_ignore_ascii_case(owner))),
    );
    out
}

/// The securable a right on `by` is checked on.
pub(super) fn securable(by: &Object) -> Securable {
    Securable::Object {
        schema: by.schema.clone(),
        name: by.name.clone(),
        column: None,
    }
}

/// The step of `w` held by `right` on `by`, which is `o` or a synonym for
/// it, and the evidence the synonym adds.
pub(super) fn right_step(ctx: &Context, right: &Right, w: &str, by: &Object, o: &Object) -> (String, String) {
    let name = by.qualified_name();
    let held = format!("{}{}", hierarchy_note(ctx, right, w, &name), right.grant_option());
    if std::ptr::eq(by, o) {
        return (format!("{w} on {name}{held}"), String::new());
    }
    let (base, owner) = (o.qualified_name(), ctx.catalog.owner_of(o).unwrap_or("its owner"));
    (
        format!(
            "{w} on the synonym {name}{held}, which stands for {base} and is owned by {owner} as {base} is: the \
             permission is checked on the synonym, and ownership chaining skips the check on {base}"
        ),
        format!("; sys.synonyms: {name} is for {base}; its owner is {owner}"),
    )
}
