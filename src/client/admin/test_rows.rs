//! Rows as the procedures answer them, built without a server, for the tests
//! of what decodes them and for the fake (feature `fake`).

use tiberius::{ColumnData, ColumnType, Row, ToSql};
use time::OffsetDateTime;

use crate::client::call::Reply;
use crate::client::contract::Procedure;

/// One column: its name, type and value.
pub(crate) type Cell = (&'static str, ColumnType, ColumnData<'static>);

pub(crate) fn text(name: &'static str, value: Option<&str>) -> Cell {
    (
        name,
        ColumnType::NVarchar,
        ColumnData::String(value.map(|v| v.to_string().into())),
    )
}

pub(crate) fn big(name: &'static str, value: Option<i64>) -> Cell {
    (name, ColumnType::Int8, ColumnData::I64(value))
}

pub(crate) fn int(name: &'static str, value: Option<i32>) -> Cell {
    (name, ColumnType::Int4, ColumnData::I32(value))
}

pub(crate) fn bit(name: &'static str, value: Option<bool>) -> Cell {
    (name, ColumnType::Bit, ColumnData::Bit(value))
}

pub(crate) fn binary(name: &'static str, value: Option<&[u8]>) -> Cell {
    (
        name,
        ColumnType::BigBinary,
        ColumnData::Binary(value.map(|v| v.to_vec().into())),
    )
}

/// A `datetime2` column, which holds UTC by contract.
pub(crate) fn utc(name: &'static str, value: Option<OffsetDateTime>) -> Cell {
    let data = match value {
        None => ColumnData::DateTime2(None),
        Some(at) => match time::PrimitiveDateTime::new(at.date(), at.time()).to_sql() {
            ColumnData::DateTime2(value) => ColumnData::DateTime2(value),
            other => panic!("a datetime2 encodes as {other:?}"),
        },
    };
    (name, ColumnType::Datetime2, data)
}

/// The reply of `procedure` holding `cells`, in their order.
pub(crate) fn reply(procedure: Procedure, cells: Vec<Cell>) -> Reply {
    let row = cells
        .into_iter()
        .fold(Row::builder(), |row, (name, kind, data)| row.column(name, kind, data))
        .build();
    Reply::of(procedure, row)
}
