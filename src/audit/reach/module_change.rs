//! The ways a right changes a module: ALTER on it, by the permission
//! hierarchy; and for a CLR module, ALTER on the assembly that holds its
//! code ("ALTER ASSEMBLY": FROM replaces the assembly's code, and with it
//! what every module it holds runs, SAFE ones as much as any).

use super::super::catalog::{Object, Securable};
use super::super::rules::Context;
use super::bound::Bound;
use super::denies;
use super::principals::hierarchy_note;
use super::right::Right;

/// How `right` changes `o` (`ALTER on app.F (by the hierarchy: ...)`), and
/// the principals a DENY refuses it to; `None` when it does not.
pub(super) fn alters(ctx: &Context, right: &Right, o: &Object) -> Option<(String, Bound)> {
    let name = o.qualified_name();
    let target = Securable::Object {
        schema: o.schema.clone(),
        name: o.name.clone(),
        column: None,
    };
    if let Some(unless) = denies::reaches(ctx, right, &target, "ALTER") {
        return Some((
            format!("ALTER on {name}{}", hierarchy_note(ctx, right, "ALTER", &name)),
            unless,
        ));
    }
    let assembly = o.assembly_name()?;
    let on = Securable::Other {
        class_desc: "ASSEMBLY".into(),
        name: Some(assembly.to_string()),
    };
    let unless = denies::reaches(ctx, right, &on, "ALTER")?;
    let described = format!("ASSEMBLY::{assembly}");
    Some((
        format!(
            "ALTER on {described}{}, which holds the code of {name} (ALTER ASSEMBLY ... FROM)",
            hierarchy_note(ctx, right, "ALTER", &described)
        ),
        unless,
    ))
}
