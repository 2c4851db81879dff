//! The JSON a set call takes (`@ResourceKeys`, `@Leases`), read as the
//! procedures read it with `ISJSON` and `OPENJSON`: the text is the
//! parameter, so the model refuses exactly what they refuse, in their order.
//!
//! Read as SQL Server reads JSON. Babelfish's own refusals of `\u0000` and
//! of half a surrogate pair are not modelled; a Rust string cannot hold
//! half a pair, so such a text is refused as not JSON at all.

use std::collections::HashSet;

use serde_json::Value;
use uuid::Uuid;

use super::check;
use super::refusal::{self, Refusal};

/// The most keys one set call may name.
pub const MAX_SET_KEYS: usize = 1000;

/// The JSON array in `text`, or `None`: NULL, not JSON, or JSON whose first
/// character is not `[` (`ISJSON` and the procedures' `PATINDEX` check).
fn array(text: &Option<String>) -> Option<Vec<Value>> {
    match serde_json::from_str(text.as_deref()?).ok()? {
        Value::Array(items) => Some(items),
        _ => None,
    }
}

/// `AcquireSet`'s `@ResourceKeys`: 1 to 1000 strings, each a key once.
pub(super) fn keys(text: &Option<String>) -> Result<Vec<String>, Refusal> {
    let items = array(text).ok_or(refusal::KEYS_ARRAY)?;
    let keys: Vec<String> = items
        .into_iter()
        .map(|item| match item {
            Value::String(key) => Ok(key),
            _ => Err(refusal::KEYS_ARRAY),
        })
        .collect::<Result<_, _>>()?;
    if !(1..=MAX_SET_KEYS).contains(&keys.len()) {
        return Err(refusal::KEYS_ARRAY);
    }
    let keys: Vec<Option<String>> = keys.into_iter().map(Some).collect();
    if keys.iter().any(|key| check::key(key) == Err(refusal::KEY_LENGTH)) {
        return Err(refusal::KEYS_KEY_LENGTH);
    }
    if keys.iter().any(|key| check::key(key).is_err()) {
        return Err(refusal::KEYS_KEY_TRAILING_SPACE);
    }
    let keys: Vec<String> = keys.into_iter().flatten().collect();
    once(&keys, refusal::KEYS_KEY_TWICE)?;
    Ok(keys)
}

/// One item of `@Leases`, checked: a key and its generation, and for
/// `PublishSet` its operation id and payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Item {
    pub(super) key: String,
    pub(super) generation: i64,
    pub(super) operation_id: Option<Uuid>,
    pub(super) payload: Option<String>,
}

/// `@Leases` of `RenewSet`, `ReleaseSet` and `AssertHolderSet` (`publish`
/// false), or of `PublishSet`, each check in the procedures' order.
pub(super) fn leases(text: &Option<String>, publish: bool) -> Result<Vec<Item>, Refusal> {
    let (shape, types) = if publish {
        (refusal::PUBLISH_SET_SHAPE, refusal::PUBLISH_SET_TYPES)
    } else {
        (refusal::SET_SHAPE, refusal::SET_TYPES)
    };
    let items = array(text).ok_or(shape.clone())?;
    let objects: Vec<serde_json::Map<String, Value>> = items
        .into_iter()
        .map(|item| match item {
            Value::Object(fields) => Ok(fields),
            _ => Err(shape.clone()),
        })
        .collect::<Result<_, _>>()?;
    // Each field by its JSON type before any is read as text: NULL is no
    // string either.
    let strings: &[&str] = if publish {
        &["ResourceKey", "OperationId", "Payload"]
    } else {
        &["ResourceKey"]
    };
    let typed = |fields: &serde_json::Map<String, Value>| {
        strings
            .iter()
            .all(|name| fields.get(*name).is_none_or(Value::is_string))
            && fields
                .get("Generation")
                .is_none_or(|value| value.is_string() || value.is_number())
    };
    if !objects.iter().all(typed) {
        return Err(types);
    }
    if !(1..=MAX_SET_KEYS).contains(&objects.len()) {
        return Err(shape);
    }
    // `OPENJSON ... WITH` reads each value as text: a number as written.
    let text = |fields: &serde_json::Map<String, Value>, name: &str| match fields.get(name) {
        Some(Value::String(text)) => Some(text.clone()),
        Some(Value::Number(number)) => Some(number.to_string()),
        _ => None,
    };
    let keys: Vec<Option<String>> = objects.iter().map(|fields| text(fields, "ResourceKey")).collect();
    if keys.iter().any(|key| check::key(key) == Err(refusal::KEY_LENGTH)) {
        return Err(refusal::SET_KEY_LENGTH);
    }
    if keys.iter().any(|key| check::key(key).is_err()) {
        return Err(refusal::SET_KEY_TRAILING_SPACE);
    }
    let keys: Vec<String> = keys.into_iter().flatten().collect();
    once(&keys, refusal::SET_KEY_TWICE)?;
    let generations: Vec<i64> = objects
        .iter()
        .map(|fields| text(fields, "Generation").as_deref().and_then(generation))
        .collect::<Option<_>>()
        .ok_or(refusal::SET_GENERATION)?;
    let (mut operation_ids, mut payloads) = (vec![None; keys.len()], vec![None; keys.len()]);
    if publish {
        operation_ids = objects
            .iter()
            .map(|fields| text(fields, "OperationId").as_deref().and_then(operation_id).map(Some))
            .collect::<Option<_>>()
            .ok_or(refusal::SET_OPERATION_ID)?;
        once(&operation_ids, refusal::SET_OPERATION_ID_TWICE)?;
        payloads = objects
            .iter()
            .map(|fields| text(fields, "Payload").map(Some))
            .collect::<Option<_>>()
            .ok_or(refusal::SET_PAYLOAD)?;
    }
    Ok(keys
        .into_iter()
        .zip(generations)
        .zip(operation_ids.into_iter().zip(payloads))
        .map(|((key, generation), (operation_id, payload))| Item {
            key,
            generation,
            operation_id,
            payload,
        })
        .collect())
}

/// `refused` when any value appears twice. Keys compare binary, and none
/// ends in a space (refused before), so binary is equality here.
fn once<T: std::hash::Hash + Eq>(values: &[T], refused: Refusal) -> Result<(), Refusal> {
    let mut seen = HashSet::with_capacity(values.len());
    if values.iter().all(|value| seen.insert(value)) {
        Ok(())
    } else {
        Err(refused)
    }
}

/// A generation as the procedures accept its text: 1 to 19 digits, not all
/// zeros, at most bigint's largest.
fn generation(text: &str) -> Option<i64> {
    let digits = !text.is_empty() && text.len() <= 19 && text.bytes().all(|b| b.is_ascii_digit());
    digits
        .then(|| text.parse::<i64>().ok())
        .flatten()
        .filter(|generation| *generation >= 1)
}

/// An operation id as `PublishSet` accepts its text: 36 characters of
/// hex digits and hyphens in a GUID's places, not the nil GUID.
fn operation_id(text: &str) -> Option<Uuid> {
    let shaped = text.len() == 36
        && text.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    shaped
        .then(|| Uuid::try_parse(text).ok())
        .flatten()
        .filter(|id| !id.is_nil())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(json: &str) -> Option<String> {
        Some(json.to_string())
    }

    #[test]
    fn keys_are_a_json_array_of_strings_each_a_key_once() {
        assert_eq!(keys(&text(" [\"a\", \"b\"]")), Ok(vec!["a".into(), "b".into()]));
        for bad in [
            None,
            text("{}"),
            text("\"a\""),
            text("[]"),
            text("[1]"),
            text("[null]"),
            text("[\"a\",]"),
        ] {
            assert_eq!(keys(&bad), Err(refusal::KEYS_ARRAY), "{bad:?}");
        }
        assert_eq!(keys(&text("[\"\"]")), Err(refusal::KEYS_KEY_LENGTH));
        assert_eq!(keys(&text("[\"a \"]")), Err(refusal::KEYS_KEY_TRAILING_SPACE));
        assert_eq!(keys(&text("[\"a\",\"a\"]")), Err(refusal::KEYS_KEY_TWICE));
        let many = serde_json::to_string(&vec!["k"; MAX_SET_KEYS + 1]).unwrap();
        assert_eq!(keys(&Some(many)), Err(refusal::KEYS_ARRAY));
    }

    #[test]
    fn a_generation_is_digits_as_written_as_a_number_or_a_string() {
        let one = |g: &str| leases(&text(&format!("[{{\"ResourceKey\":\"a\",\"Generation\":{g}}}]")), false);
        assert_eq!(one("7").unwrap()[0].generation, 7);
        assert_eq!(one("\"0007\"").unwrap()[0].generation, 7);
        assert_eq!(one("9223372036854775807").unwrap()[0].generation, i64::MAX);
        for bad in [
            "0",
            "-1",
            "1.0",
            "1e1",
            "\"7 \"",
            "\"\"",
            "9223372036854775808",
            "\"x\"",
        ] {
            assert_eq!(one(bad), Err(refusal::SET_GENERATION), "{bad}");
        }
        assert_eq!(one("null"), Err(refusal::SET_TYPES));
        assert_eq!(one("true"), Err(refusal::SET_TYPES));
    }

    #[test]
    fn a_publish_item_needs_a_guid_of_36_characters_once_and_a_string_payload() {
        let id = Uuid::new_v4();
        let item = |id: &str, payload: &str| {
            format!("{{\"ResourceKey\":\"a\",\"Generation\":1,\"OperationId\":{id},\"Payload\":{payload}}}")
        };
        let ok = leases(&text(&format!("[{}]", item(&format!("\"{id}\""), "\"\""))), true).unwrap();
        assert_eq!((ok[0].operation_id, ok[0].payload.as_deref()), (Some(id), Some("")));
        let refused = |json: String| leases(&text(&json), true).unwrap_err();
        assert_eq!(
            refused(format!("[{}]", item(&format!("\"{}\"", id.simple()), "\"p\""))),
            refusal::SET_OPERATION_ID
        );
        assert_eq!(
            refused(format!("[{}]", item(&format!("\"{}\"", Uuid::nil()), "\"p\""))),
            refusal::SET_OPERATION_ID
        );
        assert_eq!(
            refused(format!("[{}]", item(&format!("\"{id}\""), "5"))),
            refusal::PUBLISH_SET_TYPES
        );
        assert_eq!(
            refused(format!(
                "[{{\"ResourceKey\":\"a\",\"Generation\":1,\"OperationId\":\"{id}\"}}]"
            )),
            refusal::SET_PAYLOAD
        );
        let twice = format!(
            "[{},{}]",
            item(&format!("\"{id}\""), "\"p\""),
            item(&format!("\"{}\"", id.to_string().to_uppercase()), "\"p\"").replace("\"a\"", "\"b\"")
        );
        assert_eq!(refused(twice), refusal::SET_OPERATION_ID_TWICE);
    }
}
