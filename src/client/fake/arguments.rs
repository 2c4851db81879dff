//! The arguments a call binds, read back into the model's [`Call`]: in
//! contract order, as the procedure declares its parameters, the ones left
//! out at the end taking their declared defaults.

use tiberius::{ColumnData, ToSql};
use uuid::Uuid;

use crate::client::{Error, Procedure};
use crate::model::{Call, ListedLease};

/// One argument, or a trailing one left out (its default applies).
struct Arguments<'a> {
    procedure: Procedure,
    values: Vec<ColumnData<'a>>,
}

impl Arguments<'_> {
    fn unreadable(&self, index: usize, wanted: &str) -> Error {
        Error::UnexpectedReply {
            procedure: self.procedure.name(),
            detail: format!(
                "the fake cannot read argument {} ({:?}) as {wanted}",
                index + 1,
                self.values.get(index)
            ),
        }
    }

    fn text(&self, index: usize, default: Option<&str>) -> Result<Option<String>, Error> {
        match self.values.get(index) {
            None => Ok(default.map(str::to_string)),
            Some(ColumnData::String(value)) => Ok(value.as_ref().map(|v| v.to_string())),
            Some(_) => Err(self.unreadable(index, "text")),
        }
    }

    fn id(&self, index: usize) -> Result<Option<Uuid>, Error> {
        match self.values.get(index) {
            None => Ok(None),
            Some(ColumnData::Guid(value)) => Ok(*value),
            Some(_) => Err(self.unreadable(index, "a uniqueidentifier")),
        }
    }

    fn int(&self, index: usize, default: Option<i32>) -> Result<Option<i32>, Error> {
        match self.values.get(index) {
            None => Ok(default),
            Some(ColumnData::I32(value)) => Ok(*value),
            Some(ColumnData::I16(value)) => Ok(value.map(i32::from)),
            Some(ColumnData::U8(value)) => Ok(value.map(i32::from)),
            Some(_) => Err(self.unreadable(index, "an int")),
        }
    }

    fn big(&self, index: usize) -> Result<Option<i64>, Error> {
        match self.values.get(index) {
            None => Ok(None),
            Some(ColumnData::I64(value)) => Ok(*value),
            Some(ColumnData::I32(value)) => Ok(value.map(i64::from)),
            Some(_) => Err(self.unreadable(index, "a bigint")),
        }
    }

    fn bit(&self, index: usize, default: Option<bool>) -> Result<Option<bool>, Error> {
        match self.values.get(index) {
            None => Ok(default),
            Some(ColumnData::Bit(value)) => Ok(*value),
            Some(_) => Err(self.unreadable(index, "a bit")),
        }
    }
}

/// The model's call of `procedure` with `arguments`.
pub(super) fn call(procedure: Procedure, arguments: &[&dyn ToSql]) -> Result<Call, Error> {
    let a = Arguments {
        procedure,
        values: arguments.iter().map(|argument| argument.to_sql()).collect(),
    };
    Ok(match procedure {
        Procedure::Provision => Call::Provision {
            resource_key: a.text(0, None)?,
        },
        Procedure::Acquire => Call::Acquire {
            resource_key: a.text(0, None)?,
            owner: a.id(1)?,
            lease_seconds: a.int(2, None)?,
        },
        Procedure::Renew => Call::Renew {
            resource_key: a.text(0, None)?,
            owner: a.id(1)?,
            generation: a.big(2)?,
            lease_seconds: a.int(3, None)?,
        },
        Procedure::RenewMany => Call::RenewMany {
            leases: a.text(0, None)?.as_deref().and_then(listed_leases),
        },
        Procedure::Publish => Call::Publish {
            resource_key: a.text(0, None)?,
            owner: a.id(1)?,
            generation: a.big(2)?,
            operation_id: a.id(3)?,
            payload: a.text(4, None)?,
            release: a.bit(5, Some(false))?,
            source_version: a.big(6)?,
        },
        Procedure::Release => Call::Release {
            resource_key: a.text(0, None)?,
            owner: a.id(1)?,
            generation: a.big(2)?,
        },
        Procedure::GetOutcome => Call::GetOutcome { operation_id: a.id(0)? },
        Procedure::ReadPublication => Call::ReadPublication {
            resource_key: a.text(0, None)?,
        },
        Procedure::Inspect => Call::Inspect {
            resource_key: a.text(0, None)?,
        },
        Procedure::AssertHolder => Call::AssertHolder {
            resource_key: a.text(0, None)?,
            owner: a.id(1)?,
            generation: a.big(2)?,
            source_version: a.big(3)?,
        },
        Procedure::ContractVersion => Call::ContractVersion,
        Procedure::ListLeases => Call::ListLeases {
            prefix: a.text(0, Some(""))?,
            held_only: a.bit(1, Some(false))?,
            max_rows: a.int(2, Some(1000))?,
            after: a.text(3, None)?,
        },
        Procedure::ForceRelease => Call::ForceRelease {
            resource_key: a.text(0, None)?,
            operation_id: a.id(1)?,
        },
        Procedure::LeaseHistory => Call::LeaseHistory {
            resource_key: a.text(0, None)?,
            max_rows: a.int(1, Some(100))?,
        },
        Procedure::PruneTenure => Call::PruneTenure {
            older_than_days: a.int(0, None)?,
        },
        Procedure::Recover => Call::Recover {
            recovery_id: a.id(0)?,
            floor: a.big(1)?,
            database_identity: a.id(2)?,
        },
        Procedure::ResetSourceVersion => Call::ResetSourceVersion {
            resource_key: a.text(0, None)?,
            source_version: a.big(1)?,
            operation_id: a.id(2)?,
        },
        Procedure::Retire => Call::Retire {
            resource_key: a.text(0, None)?,
            operation_id: a.id(1)?,
        },
        Procedure::PruneOutcomes => Call::PruneOutcomes {
            older_than_days: a.int(0, None)?,
        },
        // A set's JSON goes to the model as the text sent: the model reads it
        // as the procedure does, refusals included.
        Procedure::AcquireSet => Call::AcquireSet {
            resource_keys: a.text(0, None)?,
            owner: a.id(1)?,
            lease_seconds: a.int(2, None)?,
        },
        Procedure::RenewSet => Call::RenewSet {
            leases: a.text(0, None)?,
            owner: a.id(1)?,
            lease_seconds: a.int(2, None)?,
        },
        Procedure::ReleaseSet => Call::ReleaseSet {
            leases: a.text(0, None)?,
            owner: a.id(1)?,
        },
        Procedure::PublishSet => Call::PublishSet {
            leases: a.text(0, None)?,
            owner: a.id(1)?,
            release: a.bit(2, Some(false))?,
        },
        Procedure::AssertHolderSet => Call::AssertHolderSet {
            leases: a.text(0, None)?,
            owner: a.id(1)?,
        },
        Procedure::AcquireSlot => Call::AcquireSlot {
            resource_key: a.text(0, None)?,
            slots: a.int(1, None)?,
            owner: a.id(2)?,
            lease_seconds: a.int(3, None)?,
        },
    })
}

/// `@Leases` read as `RenewMany` reads it: `None` unless a JSON array; each
/// element's values as the procedure reads them as text, a value it would
/// refuse (or an element that is no object) as `None`.
fn listed_leases(json: &str) -> Option<Vec<ListedLease>> {
    let serde_json::Value::Array(elements) = serde_json::from_str(json).ok()? else {
        return None;
    };
    Some(elements.iter().map(listed_lease).collect())
}

fn listed_lease(element: &serde_json::Value) -> ListedLease {
    let field = |name: &str| match element.get(name)? {
        serde_json::Value::String(text) => Some(text.clone()),
        serde_json::Value::Number(number) => Some(number.to_string()),
        _ => None,
    };
    // Digits only, as the procedure checks the text before converting it.
    let digits = |text: String, most: usize| {
        (!text.is_empty() && text.len() <= most && text.bytes().all(|b| b.is_ascii_digit())).then_some(text)
    };
    ListedLease {
        resource_key: field("ResourceKey"),
        owner: field("Owner")
            .filter(|text| text.len() == 36)
            .and_then(|text| Uuid::try_parse(&text).ok()),
        generation: field("Generation")
            .and_then(|text| digits(text, 18))
            .and_then(|text| text.parse().ok()),
        lease_seconds: field("LeaseSeconds")
            .and_then(|text| digits(text, 5))
            .and_then(|text| text.parse().ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_left_out_take_the_procedures_defaults() {
        let (key, owner, generation, id) = ("k", Uuid::new_v4(), 3i64, Uuid::new_v4());
        let read = call(Procedure::Publish, &[&key, &owner, &generation, &id, &"p"]).unwrap();
        assert_eq!(read, Call::publish("k", owner, 3, id, "p"));
        let version: Option<i64> = None;
        let read = call(
            Procedure::Publish,
            &[&key, &owner, &generation, &id, &"p", &true, &version],
        )
        .unwrap();
        assert!(matches!(
            read,
            Call::Publish {
                release: Some(true),
                source_version: None,
                ..
            }
        ));
        assert_eq!(
            call(Procedure::ListLeases, &[]).unwrap(),
            Call::ListLeases {
                prefix: Some(String::new()),
                held_only: Some(false),
                max_rows: Some(1000),
                after: None
            }
        );
    }

    #[test]
    fn an_argument_of_another_type_is_an_unexpected_reply_not_a_panic() {
        let error = call(Procedure::Acquire, &[&"k", &"not an id"]).unwrap_err();
        assert!(matches!(error, Error::UnexpectedReply { .. }), "{error:?}");
    }
}
