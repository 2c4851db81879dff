//! What an EXECUTE AS clause names. "EXECUTE AS Clause": OWNER and CALLER
//! are keywords, and a quoted name is a principal, whatever it spells: a
//! user may be called Owner. The catalog records a principal's name with
//! a mark saying it is one; an unmarked `OWNER`, `CALLER` or `SELF` is the
//! keyword, as catalogs saved before the mark wrote them.

/// Whom a module, trigger or queue runs as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ExecuteAs<'a> {
    /// EXECUTE AS OWNER: the module's owner (a trigger's is its table's).
    Owner,
    /// A principal named by itself, SELF's creator included.
    Principal(&'a str),
}

/// What `name` stands for when `principal` marks it as a principal's name;
/// `None` for CALLER, and for an unmarked SELF, whose creator the catalog
/// does not name.
pub(crate) fn execute_as(name: Option<&str>, principal: bool) -> Option<ExecuteAs<'_>> {
    let name = name?;
    if principal {
        return Some(ExecuteAs::Principal(name));
    }
    if name.eq_ignore_ascii_case("OWNER") {
        Some(ExecuteAs::Owner)
    } else if name.eq_ignore_ascii_case("CALLER") || name.eq_ignore_ascii_case("SELF") {
        None
    } else {
        Some(ExecuteAs::Principal(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_name_is_a_principal_whatever_it_spells() {
        assert_eq!(execute_as(Some("Owner"), true), Some(ExecuteAs::Principal("Owner")));
        assert_eq!(execute_as(Some("CALLER"), true), Some(ExecuteAs::Principal("CALLER")));
        assert_eq!(execute_as(Some("OWNER"), false), Some(ExecuteAs::Owner));
        assert_eq!(execute_as(Some("Caller"), false), None);
        assert_eq!(execute_as(Some("maint"), false), Some(ExecuteAs::Principal("maint")));
        assert_eq!(execute_as(None, true), None);
    }
}
