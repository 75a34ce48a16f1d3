//! `snap_spark._native`: the native checking core of snap-spark.
//!
//! One call checks a whole Arrow array of raw lines and returns the verdict columns
//! (`snap_spark.udfs.verify.VERDICT_COLUMNS`) as one Arrow struct array, through the Arrow
//! PyCapsule interface. The Python core (`snap_spark.protocol`) is the reference: every
//! column equals its output, which the differential tests prove; lines whose reason needs
//! Python's own Unicode tables are handed back to it (the `deferred` list).
//!
//! The GIL is released for all of the checking; the lines are split across `threads`
//! threads when a task owns more than one core.

pub mod check;
pub mod jcs;
pub mod json;
pub mod text;

use std::ffi::CStr;
use std::sync::Arc;

use arrow_array::builder::{BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, StringBuilder};
use arrow_array::ffi::{from_ffi, to_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{make_array, Array, ArrayRef, BinaryArray, LargeBinaryArray, LargeStringArray,
                  StringArray, StructArray};
use arrow_schema::{DataType, Field};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

use check::{check_line, finish, Clock, KeyCache, LineOut};

const SCHEMA_NAME: &CStr = c"arrow_schema";
const ARRAY_NAME: &CStr = c"arrow_array";

fn import_array(obj: &Bound<'_, PyAny>) -> PyResult<ArrayRef> {
    let capsules = obj.call_method0("__arrow_c_array__")?;
    let capsules = capsules.cast::<PyTuple>()?;
    let schema_capsule = capsules.get_item(0)?;
    let schema_capsule = schema_capsule.cast::<PyCapsule>()?;
    let array_capsule = capsules.get_item(1)?;
    let array_capsule = array_capsule.cast::<PyCapsule>()?;
    let schema_ptr = schema_capsule.pointer_checked(Some(SCHEMA_NAME))?.cast::<FFI_ArrowSchema>();
    let array_ptr = array_capsule.pointer_checked(Some(ARRAY_NAME))?.cast::<FFI_ArrowArray>();
    // SAFETY: the capsules hold an ArrowSchema and an ArrowArray (the PyCapsule interface);
    // the array is moved out, leaving a released one for the capsule's destructor.
    let data = unsafe {
        let array = std::ptr::replace(array_ptr.as_ptr(), FFI_ArrowArray::empty());
        from_ffi(array, schema_ptr.as_ref())
    }
    .map_err(|e| PyValueError::new_err(format!("cannot import the Arrow array: {e}")))?;
    Ok(make_array(data))
}

enum Lines {
    Small(BinaryArray),
    Large(LargeBinaryArray),
}

impl Lines {
    fn get(&self, i: usize) -> Option<&[u8]> {
        match self {
            Lines::Small(a) => (!a.is_null(i)).then(|| a.value(i)),
            Lines::Large(a) => (!a.is_null(i)).then(|| a.value(i)),
        }
    }
    fn len(&self) -> usize {
        match self {
            Lines::Small(a) => a.len(),
            Lines::Large(a) => a.len(),
        }
    }
}

fn lines_of(array: ArrayRef) -> PyResult<Lines> {
    let data = array.to_data();
    match array.data_type() {
        DataType::Binary => Ok(Lines::Small(BinaryArray::from(data))),
        DataType::LargeBinary => Ok(Lines::Large(LargeBinaryArray::from(data))),
        DataType::Utf8 => Ok(Lines::Small(BinaryArray::from(
            data.into_builder().data_type(DataType::Binary).build()
                .map_err(|e| PyValueError::new_err(e.to_string()))?))),
        DataType::LargeUtf8 => Ok(Lines::Large(LargeBinaryArray::from(
            data.into_builder().data_type(DataType::LargeBinary).build()
                .map_err(|e| PyValueError::new_err(e.to_string()))?))),
        other => Err(PyTypeError::new_err(format!("lines must be binary or string, not {other}"))),
    }
}

fn errors_of(array: Option<ArrayRef>, n: usize) -> PyResult<Vec<Option<String>>> {
    let Some(array) = array else { return Ok(vec![None; n]) };
    let values: Vec<Option<String>> = match array.data_type() {
        DataType::Utf8 => {
            let a = array.as_any().downcast_ref::<StringArray>().expect("utf8");
            a.iter().map(|v| v.map(str::to_string)).collect()
        }
        DataType::LargeUtf8 => {
            let a = array.as_any().downcast_ref::<LargeStringArray>().expect("large utf8");
            a.iter().map(|v| v.map(str::to_string)).collect()
        }
        DataType::Null => vec![None; array.len()],
        other => return Err(PyTypeError::new_err(format!("read errors must be strings, not {other}"))),
    };
    if values.len() != n {
        return Err(PyValueError::new_err("lines and read errors differ in length"));
    }
    Ok(values)
}

fn clock_of(mode: u8, value: f64) -> PyResult<Clock> {
    match mode {
        0 => Ok(Clock::Refuse),
        1 => Ok(Clock::Fixed(value)),
        2 => Ok(Clock::Message),
        _ => Err(PyValueError::new_err(format!("unknown clock mode {mode}"))),
    }
}

fn check_range(lines: &Lines, errors: &[Option<String>], clocks: &[Clock], start: usize, end: usize,
               max_drift: f64) -> Vec<LineOut> {
    let mut keys = KeyCache::default();
    let mut out: Vec<LineOut> = (start..end)
        .map(|i| {
            let clock = if clocks.len() == 1 { clocks[0] } else { clocks[i] };
            check_line(lines.get(i), errors[i].as_deref(), clock, max_drift, &mut keys)
        })
        .collect();
    for line in out.iter_mut() {
        finish(line);
    }
    out
}

fn build(results: &[LineOut]) -> StructArray {
    let n = results.len();
    let mut is_envelope = BooleanBuilder::with_capacity(n);
    let mut has_sig = BooleanBuilder::with_capacity(n);
    let mut needs_clock = BooleanBuilder::with_capacity(n);
    let mut envelope_at = Float64Builder::with_capacity(n);
    let mut received_at = Float64Builder::with_capacity(n);
    let mut timestamp = Int64Builder::with_capacity(n);
    let mut pre_code = Int32Builder::with_capacity(n);
    let mut auth_code = Int32Builder::with_capacity(n);
    let string_names = ["source", "msg_id", "version", "sender", "recipient", "msg_type", "method",
                        "canonical_payload", "task_id", "context_id", "task_state", "pre_detail",
                        "auth_detail"];
    let mut strings: Vec<StringBuilder> = string_names.iter().map(|_| StringBuilder::new()).collect();
    for r in results {
        is_envelope.append_value(r.is_envelope);
        has_sig.append_value(r.has_sig);
        needs_clock.append_value(r.needs_clock);
        envelope_at.append_option(r.envelope_received_at);
        received_at.append_option(r.received_at);
        timestamp.append_option(r.timestamp);
        pre_code.append_option(r.pre_code);
        auth_code.append_option(r.auth_code);
        let values = [&r.source, &r.msg_id, &r.version, &r.sender, &r.recipient, &r.msg_type,
                      &r.method, &r.canonical_payload, &r.task_id, &r.context_id, &r.task_state,
                      &r.pre_detail, &r.auth_detail];
        for (builder, value) in strings.iter_mut().zip(values) {
            builder.append_option(value.as_deref());
        }
    }
    let mut strings: Vec<ArrayRef> = strings.iter_mut().map(|b| Arc::new(b.finish()) as ArrayRef).collect();
    let take = |name: &str| strings[string_names.iter().position(|n| *n == name).unwrap()].clone();
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("is_envelope", Arc::new(is_envelope.finish())),
        ("source", take("source")),
        ("envelope_received_at", Arc::new(envelope_at.finish())),
        ("received_at", Arc::new(received_at.finish())),
        ("msg_id", take("msg_id")),
        ("version", take("version")),
        ("sender", take("sender")),
        ("recipient", take("recipient")),
        ("msg_type", take("msg_type")),
        ("method", take("method")),
        ("timestamp", Arc::new(timestamp.finish())),
        ("has_sig", Arc::new(has_sig.finish())),
        ("canonical_payload", take("canonical_payload")),
        ("task_id", take("task_id")),
        ("context_id", take("context_id")),
        ("task_state", take("task_state")),
        ("pre_code", Arc::new(pre_code.finish())),
        ("pre_detail", take("pre_detail")),
        ("auth_code", Arc::new(auth_code.finish())),
        ("auth_detail", take("auth_detail")),
        ("needs_clock", Arc::new(needs_clock.finish())),
    ];
    strings.clear();
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = columns
        .into_iter()
        .map(|(name, array)| (Field::new(name, array.data_type().clone(), true), array))
        .unzip();
    StructArray::new(fields.into(), arrays, None)
}

/// check_batch(lines, read_errors, clock_mode, clock_value, max_drift, threads, clock_modes=None, clock_values=None)
///
/// Check an Arrow array of raw lines (binary or string, nulls for unreadable lines).
/// Returns `(schema_capsule, array_capsule, deferred)`: the verdict columns as an Arrow struct
/// array, and the indices of lines the reference core must decide.
#[pyfunction]
#[pyo3(signature = (lines, read_errors, clock_mode, clock_value, max_drift, threads, clock_modes=None, clock_values=None))]
#[allow(clippy::too_many_arguments)]
fn check_batch<'py>(
    py: Python<'py>,
    lines: &Bound<'py, PyAny>,
    read_errors: Option<&Bound<'py, PyAny>>,
    clock_mode: u8,
    clock_value: f64,
    max_drift: f64,
    threads: usize,
    clock_modes: Option<Vec<u8>>,
    clock_values: Option<Vec<f64>>,
) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>, Vec<usize>)> {
    let lines = lines_of(import_array(lines)?)?;
    let n = lines.len();
    let errors = errors_of(read_errors.map(import_array).transpose()?, n)?;
    let clocks: Vec<Clock> = match (clock_modes, clock_values) {
        (Some(modes), Some(values)) => {
            if modes.len() != n || values.len() != n {
                return Err(PyValueError::new_err("one clock per line is needed"));
            }
            modes.iter().zip(&values).map(|(m, v)| clock_of(*m, *v)).collect::<PyResult<_>>()?
        }
        _ => vec![clock_of(clock_mode, clock_value)?],
    };
    let threads = threads.max(1).min(n.max(1));
    let (array, schema, deferred) = py.detach(|| {
        let results: Vec<LineOut> = if threads <= 1 || n < 64 {
            check_range(&lines, &errors, &clocks, 0, n, max_drift)
        } else {
            let chunk = n.div_ceil(threads);
            std::thread::scope(|scope| {
                let handles: Vec<_> = (0..threads)
                    .map(|t| {
                        let (start, end) = (t * chunk, ((t + 1) * chunk).min(n));
                        let (lines, errors, clocks) = (&lines, &errors, &clocks);
                        scope.spawn(move || check_range(lines, errors, clocks, start, end, max_drift))
                    })
                    .collect();
                handles.into_iter().flat_map(|h| h.join().expect("a checking thread")).collect()
            })
        };
        let deferred: Vec<usize> = results.iter().enumerate().filter(|(_, r)| r.deferred).map(|(i, _)| i).collect();
        let data = build(&results).into_data();
        let (array, schema) = to_ffi(&data).expect("export of the verdict columns");
        (array, schema, deferred)
    });
    let schema = PyCapsule::new_with_value(py, schema, SCHEMA_NAME)?;
    let array = PyCapsule::new_with_value(py, array, ARRAY_NAME)?;
    Ok((schema, array, deferred))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_batch, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
