//! One of the crate's two unsafe modules (the other is `key/mac.rs`): three
//! raw CPython calls on the path every verification takes, each one
//! measured against its safe pyo3 equivalent under callgrind
//! (docs/design-notes.md, "The payload into Python objects"). Every function
//! here is safe to call: it checks what the raw call assumes and reports a
//! failed allocation as the pending error.
#![allow(unsafe_code)]

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyType};

extern "C" {
    // Exported by every CPython this crate builds for (3.10 to 3.14, GIL
    // and free-threaded); pyo3-ffi leaves it out because it is private.
    fn _PyDict_NewPresized(minused: ffi::Py_ssize_t) -> *mut ffi::PyObject;
}

/// A Python string of `text`. ASCII text (almost every claim value) is
/// copied straight into a one-byte string, skipping the UTF-8 decoder that
/// `PyString::new` runs; anything else goes through `PyString::new`.
pub(super) fn string<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyString>> {
    let Ok(length) = ffi::Py_ssize_t::try_from(text.len()) else {
        return Ok(PyString::new(py, text));
    };
    if !text.is_ascii() {
        return Ok(PyString::new(py, text));
    }
    // SAFETY: `PyUnicode_New(length, 127)` returns a new reference to a
    // compact ASCII string with room for `length` one-byte characters and
    // its terminator, or NULL with an exception set (checked by
    // `from_owned_ptr_or_err`). The copy writes exactly `length` bytes of
    // ASCII, which is what the object claims to hold; the string is not
    // shared before it is filled.
    unsafe {
        let raw = ffi::PyUnicode_New(length, 127);
        let made = Bound::from_owned_ptr_or_err(py, raw)?;
        let data = ffi::PyUnicode_DATA(raw).cast::<u8>();
        std::ptr::copy_nonoverlapping(text.as_ptr(), data, text.len());
        *data.add(text.len()) = 0;
        Ok(made.cast_into_unchecked())
    }
}

/// An empty dict with room for `members` entries before it resizes.
pub(super) fn dict_with_room(py: Python<'_>, members: usize) -> PyResult<Bound<'_, PyDict>> {
    if members <= 5 {
        // A new dict already holds five without resizing.
        return Ok(PyDict::new(py));
    }
    let members = ffi::Py_ssize_t::try_from(members.min(1 << 16)).unwrap_or(1 << 16);
    // SAFETY: `_PyDict_NewPresized` returns a new reference to an empty
    // dict or NULL with an exception set (checked by `from_owned_ptr_or_err`).
    unsafe {
        let made = Bound::from_owned_ptr_or_err(py, _PyDict_NewPresized(members))?;
        Ok(made.cast_into_unchecked())
    }
}

/// A Python class whose instances hold one object in a `__slots__` member,
/// made the way its `__init__(value)` would make them (allocate, store the
/// slot) without running a Python frame. `Claims` is one: its `__init__`
/// only stores `_data`.
pub(super) struct SlotClass {
    class: Py<PyType>,
    /// Where the slot lives in an instance (from its member descriptor).
    offset: usize,
}

impl SlotClass {
    /// The class `class` with the slot `name`, after checking that a plain
    /// allocation is how `class` makes its instances: `object.__new__`, not
    /// abstract, and `name` a writable object slot defined by `class` itself.
    pub(super) fn new(class: &Bound<'_, PyType>, name: &str) -> PyResult<SlotClass> {
        let refuse = |why: &str| {
            pyo3::exceptions::PyTypeError::new_err(format!(
                "claims_slot: {} {why}",
                class
                    .name()
                    .map_or_else(|_| "?".to_owned(), |n| n.to_string())
            ))
        };
        let descriptor = class
            .getattr(pyo3::intern!(class.py(), "__dict__"))?
            .get_item(name)
            .map_err(|_| refuse("defines no such slot"))?;
        let ty = class.as_type_ptr();
        // SAFETY: reads of immutable fields of live objects: the type's
        // slots and flags, the descriptor's type, owner and member
        // definition (checked to be a member descriptor before its fields
        // are read).
        let offset = unsafe {
            let object_new = (*std::ptr::addr_of_mut!(ffi::PyBaseObject_Type)).tp_new;
            if (*ty).tp_new.map(|f| f as usize) != object_new.map(|f| f as usize) {
                return Err(refuse("has its own __new__"));
            }
            if (*ty).tp_alloc.is_none()
                || ffi::PyType_HasFeature(ty, ffi::Py_TPFLAGS_IS_ABSTRACT) != 0
            {
                return Err(refuse("cannot be allocated directly"));
            }
            let raw = descriptor.as_ptr();
            if ffi::Py_TYPE(raw) != std::ptr::addr_of_mut!(ffi::PyMemberDescr_Type) {
                return Err(refuse("slot is not a member"));
            }
            let member = &*raw.cast::<ffi::PyMemberDescrObject>();
            if member.d_common.d_type != ty {
                return Err(refuse("slot is defined by another class"));
            }
            let definition = &*member.d_member.cast::<ffi::PyMemberDef>();
            let offset = usize::try_from(definition.offset).unwrap_or(0);
            let end = offset + std::mem::size_of::<*mut ffi::PyObject>();
            if definition.type_code != ffi::Py_T_OBJECT_EX
                || definition.flags & ffi::Py_READONLY != 0
                || offset % std::mem::align_of::<*mut ffi::PyObject>() != 0
                || offset < std::mem::size_of::<ffi::PyObject>()
                || end > usize::try_from((*ty).tp_basicsize).unwrap_or(0)
            {
                return Err(refuse("slot is not a writable object slot"));
            }
            offset
        };
        Ok(SlotClass {
            class: class.clone().unbind(),
            offset,
        })
    }

    /// A new instance whose slot holds `value`.
    pub(super) fn make<'py>(&self, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = value.py();
        let ty = self.class.bind(py).as_type_ptr();
        // SAFETY: `tp_alloc` (checked present in `new`) returns a new,
        // zero-filled instance of `ty` or NULL with an exception set. The
        // slot at `offset` (checked in `new` to be an object member inside
        // the instance, pointer-aligned) is NULL there and receives a new
        // reference, as `PyMember_SetOne` would store it; the instance is
        // not shared yet.
        #[allow(clippy::cast_ptr_alignment)]
        unsafe {
            let alloc = (*ty).tp_alloc.unwrap_or(ffi::PyType_GenericAlloc);
            let made = Bound::from_owned_ptr_or_err(py, alloc(ty, 0))?;
            let slot = made
                .as_ptr()
                .cast::<u8>()
                .add(self.offset)
                .cast::<*mut ffi::PyObject>();
            *slot = value.clone().into_ptr();
            Ok(made)
        }
    }

    pub(super) fn clone_ref(&self, py: Python<'_>) -> SlotClass {
        SlotClass {
            class: self.class.clone_ref(py),
            offset: self.offset,
        }
    }
}
