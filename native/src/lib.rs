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

pub mod batch;
pub mod check;
pub mod jcs;
pub mod json;
pub mod tasks;
pub mod text;

use std::ffi::CStr;
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, BooleanBuilder, Float64Builder, Int32Builder, Int64Builder, StringBuilder,
                           TimestampMicrosecondBuilder};
use arrow_array::ffi::{from_ffi, to_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow_array::{make_array, Array, ArrayRef, BinaryArray, Float64Array, Int64Array, LargeBinaryArray,
                  LargeStringArray, StringArray, StructArray};
use arrow_schema::{DataType, Field};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods, PyTuple};

use check::{check_line, finish_all, Clock, KeyCache, LineOut};

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
    let mut keys = KeyCache::take();
    let mut out: Vec<LineOut> = (start..end)
        .map(|i| {
            let clock = if clocks.len() == 1 { clocks[0] } else { clocks[i] };
            check_line(lines.get(i), errors[i].as_deref(), clock, max_drift, &mut keys)
        })
        .collect();
    keys.give_back();
    finish_all(&mut out);
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
    struct_of(columns)
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

fn strings_of(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<StringArray> {
    let array = import_array(obj)?;
    array.as_any().downcast_ref::<StringArray>().cloned()
        .ok_or_else(|| PyTypeError::new_err(format!("{name} must be a string array, not {}", array.data_type())))
}

/// The latest second a `datetime` holds (9999-12-31 23:59:59): later, or before the epoch,
/// a task table's time column is null (`snap_spark.pipeline.tasks._ts`).
const MAX_SECONDS: i64 = 253_402_300_799;

fn micros(seconds: Option<i64>) -> Option<i64> {
    seconds.filter(|s| (0..=MAX_SECONDS).contains(s)).map(|s| s * 1_000_000)
}

fn struct_of(columns: Vec<(&str, ArrayRef)>) -> StructArray {
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = columns
        .into_iter()
        .map(|(name, array)| (Field::new(name, array.data_type().clone(), true), array))
        .unzip();
    StructArray::new(fields.into(), arrays, None)
}

fn export<'py>(py: Python<'py>, array: StructArray) -> PyResult<(Bound<'py, PyCapsule>, Bound<'py, PyCapsule>)> {
    let (array, schema) = to_ffi(&array.into_data())
        .map_err(|e| PyValueError::new_err(format!("cannot export an Arrow array: {e}")))?;
    Ok((PyCapsule::new_with_value(py, schema, SCHEMA_NAME)?,
        PyCapsule::new_with_value(py, array, ARRAY_NAME)?))
}

fn event_columns<'a>(events: &[tasks::EventRow<'a>]) -> StructArray {
    let strings = |get: &dyn Fn(&tasks::EventRow<'a>) -> Option<&'a str>| -> ArrayRef {
        Arc::new(events.iter().map(get).collect::<StringArray>())
    };
    let flags = |get: &dyn Fn(&tasks::EventRow<'a>) -> bool| -> ArrayRef {
        let mut b = BooleanBuilder::with_capacity(events.len());
        events.iter().for_each(|e| b.append_value(get(e)));
        Arc::new(b.finish())
    };
    let mut time = TimestampMicrosecondBuilder::with_capacity(events.len()).with_timezone("UTC");
    events.iter().for_each(|e| time.append_option(micros(Some(e.timestamp))));
    struct_of(vec![
        ("task_id", strings(&|e| Some(e.task_id))),
        ("seq", Arc::new(events.iter().map(|e| e.seq).collect::<Int64Array>())),
        ("context_id", strings(&|e| e.context_id)),
        ("previous_state", strings(&|e| e.previous_state)),
        ("new_state", strings(&|e| Some(e.new_state))),
        ("legal", flags(&|e| e.legal)),
        ("applied", flags(&|e| e.applied)),
        ("anomaly", strings(&|e| e.anomaly)),
        ("by_owner", flags(&|e| e.by_owner)),
        ("message_id", strings(&|e| Some(e.message_id))),
        ("sender", strings(&|e| Some(e.sender))),
        ("timestamp", Arc::new(events.iter().map(|e| e.timestamp).collect::<Int64Array>())),
        ("event_time", Arc::new(time.finish())),
        ("received_at", Arc::new(events.iter().map(|e| e.received_at).collect::<Float64Array>())),
    ])
}

fn task_columns<'a>(rows: &[tasks::TaskRow<'a>]) -> StructArray {
    let strings = |get: &dyn Fn(&tasks::TaskRow<'a>) -> Option<&'a str>| -> ArrayRef {
        Arc::new(rows.iter().map(get).collect::<StringArray>())
    };
    let counts = |get: &dyn Fn(&tasks::TaskRow<'a>) -> i64| -> ArrayRef {
        Arc::new(rows.iter().map(get).collect::<Int64Array>())
    };
    let mut time = TimestampMicrosecondBuilder::with_capacity(rows.len()).with_timezone("UTC");
    rows.iter().for_each(|t| time.append_option(micros(t.state_timestamp)));
    struct_of(vec![
        ("task_id", strings(&|t| Some(t.task_id))),
        ("context_id", strings(&|t| t.context_id)),
        ("owner", strings(&|t| t.owner)),
        ("state", strings(&|t| t.state)),
        ("state_timestamp", Arc::new(rows.iter().map(|t| t.state_timestamp).collect::<Int64Array>())),
        ("state_time", Arc::new(time.finish())),
        ("last_message_id", strings(&|t| t.last_message_id)),
        ("reports", counts(&|t| t.reports)),
        ("transitions", counts(&|t| t.transitions)),
        ("illegal_transitions", counts(&|t| t.illegal_transitions)),
        ("foreign_reports", counts(&|t| t.foreign_reports)),
    ])
}

type Capsules<'py> = (Bound<'py, PyCapsule>, Bound<'py, PyCapsule>);

/// fold_tasks(task_id, context_id, task_state, sender, msg_id, timestamp, received_at)
///
/// Fold the state reports given as Arrow arrays (strings, int64 timestamps, float64
/// receipt times), grouped by task, into the rows of `task_events` and `tasks`: two
/// `(schema_capsule, array_capsule)` pairs of struct arrays. `None` when the Python fold
/// must take them (a state outside the six, a null where a report needs a value, a NaN
/// receipt time, a task whose rows are not next to each other).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn fold_tasks<'py>(
    py: Python<'py>,
    task_id: &Bound<'py, PyAny>,
    context_id: &Bound<'py, PyAny>,
    task_state: &Bound<'py, PyAny>,
    sender: &Bound<'py, PyAny>,
    msg_id: &Bound<'py, PyAny>,
    timestamp: &Bound<'py, PyAny>,
    received_at: &Bound<'py, PyAny>,
) -> PyResult<Option<(Capsules<'py>, Capsules<'py>)>> {
    let (task_id, context_id, task_state) = (strings_of(task_id, "task_id")?,
                                             strings_of(context_id, "context_id")?,
                                             strings_of(task_state, "task_state")?);
    let (sender, msg_id) = (strings_of(sender, "sender")?, strings_of(msg_id, "msg_id")?);
    let timestamp = import_array(timestamp)?;
    let timestamp = timestamp.as_any().downcast_ref::<Int64Array>().cloned()
        .ok_or_else(|| PyTypeError::new_err("timestamp must be an int64 array"))?;
    let received_at = import_array(received_at)?;
    let received_at = received_at.as_any().downcast_ref::<Float64Array>().cloned()
        .ok_or_else(|| PyTypeError::new_err("received_at must be a float64 array"))?;
    let n = task_id.len();
    if [context_id.len(), task_state.len(), sender.len(), msg_id.len(), timestamp.len(),
        received_at.len()].iter().any(|&len| len != n) {
        return Err(PyValueError::new_err("the report columns differ in length"));
    }
    let folded = py.detach(|| {
        let mut reports = Vec::with_capacity(n);
        for i in 0..n {
            if task_id.is_null(i) || task_state.is_null(i) || sender.is_null(i) || msg_id.is_null(i)
                || timestamp.is_null(i) {
                return None;
            }
            reports.push(tasks::Report {
                task_id: task_id.value(i),
                context_id: (!context_id.is_null(i)).then(|| context_id.value(i)),
                state: task_state.value(i),
                sender: sender.value(i),
                msg_id: msg_id.value(i),
                timestamp: timestamp.value(i),
                received_at: (!received_at.is_null(i)).then(|| received_at.value(i)),
            });
        }
        let (events, rows) = tasks::fold(&reports)?;
        Some((event_columns(&events), task_columns(&rows)))
    });
    match folded {
        None => Ok(None),
        Some((events, rows)) => Ok(Some((export(py, events)?, export(py, rows)?))),
    }
}

fn pending_of(items: &[(Vec<u8>, Vec<u8>, Vec<u8>)]) -> PyResult<Vec<Option<batch::Pending>>> {
    items.iter().map(|(key, sig, msg)| {
        let key_x: [u8; 32] = key.as_slice().try_into().map_err(|_| PyValueError::new_err("a key is 32 bytes"))?;
        let sig: [u8; 64] = sig.as_slice().try_into().map_err(|_| PyValueError::new_err("a signature is 64 bytes"))?;
        let msg: [u8; 32] = msg.as_slice().try_into().map_err(|_| PyValueError::new_err("a message is 32 bytes"))?;
        Ok(batch::parse_key(&key_x).map(|(key, table)| batch::Pending { key_x, key, table, sig, msg }))
    }).collect()
}

/// verify_signatures(items, batched=True)
///
/// Whether each BIP-340 signature of `items` (`(x-only key, signature, 32-byte message)`
/// byte triples) verifies: in batches as check 8 does (`batched`), or one verify each.
/// A key that is no curve point makes its item `False`.
#[pyfunction]
#[pyo3(signature = (items, batched=true))]
fn verify_signatures(py: Python<'_>, items: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>, batched: bool) -> PyResult<Vec<bool>> {
    let pending = pending_of(&items)?;
    Ok(py.detach(|| {
        let present: Vec<&batch::Pending> = pending.iter().flatten().collect();
        let verdicts = if batched {
            batch::verify_all(&present)
        } else {
            present.iter().map(|p| batch::verify_one(p)).collect()
        };
        let mut verdicts = verdicts.into_iter();
        pending.iter().map(|p| p.is_some() && verdicts.next().expect("a verdict")).collect()
    }))
}

/// batch_holds(items)
///
/// Whether one batch equation over all of `items` holds (see `verify_signatures`):
/// `True` means every signature verifies; `False`, that at least one does not.
#[pyfunction]
fn batch_holds(py: Python<'_>, items: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>) -> PyResult<bool> {
    let pending = pending_of(&items)?;
    if pending.iter().any(Option::is_none) {
        return Ok(false);
    }
    Ok(py.detach(|| batch::batch_holds(&pending.iter().flatten().collect::<Vec<_>>())))
}

/// line_text(lines)
///
/// The `raw_text` and `raw_bytes` columns of `raw_messages` for an Arrow array of raw lines
/// (binary or string; null for an unreadable line), as `(schema, array)` capsules of a struct
/// array: a valid UTF-8 line's text and a null; an invalid line's text with U+FFFD for each
/// maximal invalid subpart (what Python's `bytes.decode("utf-8", "replace")` gives) and its
/// exact bytes; a null line two nulls. `snap_spark.udfs.verify.line_text` is the reference.
#[pyfunction]
fn line_text<'py>(py: Python<'py>, lines: &Bound<'py, PyAny>) -> PyResult<Capsules<'py>> {
    let lines = lines_of(import_array(lines)?)?;
    let columns = py.detach(|| {
        let n = lines.len();
        let mut texts = StringBuilder::with_capacity(n, 0);
        let mut exact = BinaryBuilder::new();
        for i in 0..n {
            match lines.get(i) {
                None => {
                    texts.append_null();
                    exact.append_null();
                }
                Some(raw) => match std::str::from_utf8(raw) {
                    Ok(text) => {
                        texts.append_value(text);
                        exact.append_null();
                    }
                    Err(_) => {
                        texts.append_value(String::from_utf8_lossy(raw));
                        exact.append_value(raw);
                    }
                },
            }
        }
        struct_of(vec![("raw_text", Arc::new(texts.finish()) as ArrayRef),
                       ("raw_bytes", Arc::new(exact.finish()) as ArrayRef)])
    });
    export(py, columns)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_batch, m)?)?;
    m.add_function(wrap_pyfunction!(fold_tasks, m)?)?;
    m.add_function(wrap_pyfunction!(verify_signatures, m)?)?;
    m.add_function(wrap_pyfunction!(batch_holds, m)?)?;
    m.add_function(wrap_pyfunction!(line_text, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
