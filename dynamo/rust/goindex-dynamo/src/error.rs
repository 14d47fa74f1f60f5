//! Errors: one [`ErrorKind`] per `GOINDEX_E*` status code, and the
//! [`Error`] that carries it with the library's detail.

use std::ffi::CStr;
use std::fmt;
use std::os::raw::{c_char, c_int};

use crate::sys;

/// Result is `std::result::Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

/// ErrorKind names the failure of a library call: one variant per
/// `GOINDEX_E*` code of `include/goindex.h`, plus [`ErrorKind::Unknown`] for
/// a code this crate does not know (a newer library may add codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// InvalidArgument is GOINDEX_EINVAL: an argument the library refuses
    /// (an unknown policy, a NaN temperature, fewer tokens than blocks need),
    /// or an event Dynamo's router refuses (an unknown storage tier or an
    /// unsupported residency domain, [`crate::RouterEvent::targets_primary`]),
    /// which the crate refuses without calling the library.
    InvalidArgument,
    /// UnknownHandle is GOINDEX_EHANDLE: the handle is closed or unknown.
    UnknownHandle,
    /// BadConfig is GOINDEX_ECONFIG: the config JSON is malformed, has an
    /// unknown key or a value out of range.
    BadConfig,
    /// TooBig is GOINDEX_ETOOBIG: a length over one of the `MAX_*` limits.
    TooBig,
    /// BufferTooSmall is GOINDEX_EBUFFER. The crate sizes every output
    /// buffer itself and retries with the size the library asks for, so
    /// callers only see it if the library breaks that contract.
    BufferTooSmall,
    /// ParentBlockNotFound is GOINDEX_EPARENT: a stored event's parent is
    /// not held by the member (Dynamo's `ParentBlockNotFound`); nothing
    /// changed.
    ParentBlockNotFound,
    /// InvalidBlockSequence is GOINDEX_ESEQUENCE: the parent is among the
    /// event's blocks, or a block would move to a second position (Dynamo's
    /// `InvalidBlockSequence`); nothing changed.
    InvalidBlockSequence,
    /// BlockNotFound is GOINDEX_ENOTFOUND: some removed hashes were unknown
    /// (Dynamo's `BlockNotFound`); the known ones were removed. Exact mode
    /// only: ckf mode counts unknown removals and succeeds.
    BlockNotFound,
    /// CapacityExhausted is GOINDEX_ECAPACITY: in ckf mode the blocks are
    /// tracked exactly but not all admitted to the filter; or, with nothing
    /// changed, a new member found every ckf lane taken or the exact tree ran
    /// out of node ids.
    CapacityExhausted,
    /// WrongMode is GOINDEX_EMODE: the call is not available in the handle's
    /// mode.
    WrongMode,
    /// BadFrame is GOINDEX_EFRAME: a malformed or rejected relay frame.
    BadFrame,
    /// BadReplica is GOINDEX_EREPLICA: the replica file cannot be attached.
    BadReplica,
    /// NoCandidate is GOINDEX_ENOCANDIDATE: no candidate has every signal
    /// the scoring policy needs.
    NoCandidate,
    /// Internal is GOINDEX_EINTERNAL: the library recovered from an internal
    /// failure; the handle's state is unspecified, so drop the indexer.
    Internal,
    /// Unavailable is GOINDEX_EUNAVAILABLE: the feature is not built into
    /// this library (no call returns it today; kept for older libraries).
    Unavailable,
    /// Unknown is a status code this crate does not know.
    Unknown(i32),
}

/// CODES is the one table between status codes and kinds; both directions
/// of the mapping read it.
const CODES: [(c_int, ErrorKind); 15] = [
    (sys::EINVAL, ErrorKind::InvalidArgument),
    (sys::EHANDLE, ErrorKind::UnknownHandle),
    (sys::ECONFIG, ErrorKind::BadConfig),
    (sys::ETOOBIG, ErrorKind::TooBig),
    (sys::EBUFFER, ErrorKind::BufferTooSmall),
    (sys::EPARENT, ErrorKind::ParentBlockNotFound),
    (sys::ESEQUENCE, ErrorKind::InvalidBlockSequence),
    (sys::ENOTFOUND, ErrorKind::BlockNotFound),
    (sys::ECAPACITY, ErrorKind::CapacityExhausted),
    (sys::EMODE, ErrorKind::WrongMode),
    (sys::EFRAME, ErrorKind::BadFrame),
    (sys::EREPLICA, ErrorKind::BadReplica),
    (sys::ENOCANDIDATE, ErrorKind::NoCandidate),
    (sys::EINTERNAL, ErrorKind::Internal),
    (sys::EUNAVAILABLE, ErrorKind::Unavailable),
];

impl ErrorKind {
    /// from_code returns the kind of a failed call's status code, or `None`
    /// for `GOINDEX_OK` (0).
    pub fn from_code(code: i32) -> Option<ErrorKind> {
        if code == sys::OK {
            return None;
        }
        let kind = CODES.iter().find(|(c, _)| *c == code).map_or(ErrorKind::Unknown(code), |&(_, k)| k);
        Some(kind)
    }

    /// code returns the kind's `GOINDEX_E*` status code.
    pub fn code(self) -> i32 {
        match self {
            ErrorKind::Unknown(code) => code,
            kind => {
                CODES.iter().find(|(_, k)| *k == kind).map(|&(c, _)| c).expect("every named kind has a row in CODES")
            }
        }
    }

    /// name returns the library's static name of the kind's code
    /// (`goindex_strerror`), e.g. "parent block not held by the member".
    pub fn name(self) -> &'static str {
        // SAFETY: goindex_strerror accepts any code and returns a static,
        // NUL-terminated string that is never freed.
        let p = unsafe { sys::goindex_strerror(self.code()) };
        // SAFETY: p is non-NULL and NUL-terminated (above); 'static.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("goindex: non-UTF-8 error name")
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Error is a failed library call: its [`ErrorKind`] (exact: from the
/// status code) and the library's detail from `goindex_last_error`.
///
/// The library keeps one detail per handle (and one for every failed open
/// of the process), so when several threads fail on one handle at once a
/// detail may describe another thread's failure; the kind is always this
/// call's. Display prints the detail, e.g. "goindex_insert: radix: parent
/// block not found (member 7/0, event 3, block 99)".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    detail: String,
}

impl Error {
    /// from_call builds the error of `call` on `handle` (0 for open), which
    /// returned `code` (not OK), reading the library's detail right away.
    pub(crate) fn from_call(call: &str, handle: u64, code: c_int) -> Error {
        let kind = ErrorKind::from_code(code).unwrap_or(ErrorKind::Unknown(code));
        let detail = last_error(handle)
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| format!("{call}: {} (handle {handle})", kind.name()));
        Error { kind, detail }
    }

    /// unsupported_event builds the error of an event the crate refuses
    /// before calling the library ([`crate::Indexer::apply_event`] on an
    /// event [`crate::RouterEvent::targets_primary`] calls unsupported):
    /// kind [`ErrorKind::InvalidArgument`], detail naming the reason.
    pub(crate) fn unsupported_event(detail: String) -> Error {
        Error { kind: ErrorKind::InvalidArgument, detail }
    }

    /// kind returns what failed.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// code returns the call's `GOINDEX_E*` status code.
    pub fn code(&self) -> i32 {
        self.kind.code()
    }

    /// detail returns the library's description of the failure, prefixed
    /// with the C call's name.
    pub fn detail(&self) -> &str {
        &self.detail
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.detail)
    }
}

impl std::error::Error for Error {}

/// check turns a status code into a Result, reading the detail on failure.
pub(crate) fn check(call: &str, handle: u64, code: c_int) -> Result<()> {
    if code == sys::OK {
        Ok(())
    } else {
        Err(Error::from_call(call, handle, code))
    }
}

/// DETAIL_BYTES is the first buffer for a detail; library details are one
/// line, well under it, and a longer one is read again at its full size.
const DETAIL_BYTES: usize = 256;

/// last_error returns the detail of the last failure on handle, or `None`
/// when the handle is closed or unknown (its detail went with it).
fn last_error(handle: u64) -> Option<String> {
    let mut buf = vec![0u8; DETAIL_BYTES];
    loop {
        let mut needed = 0usize;
        // SAFETY: buf has buf.len() writable bytes; needed is a valid
        // out-pointer; the library keeps neither after the call.
        let rc = unsafe { sys::goindex_last_error(handle, buf.as_mut_ptr().cast::<c_char>(), buf.len(), &mut needed) };
        if rc != sys::OK {
            return None;
        }
        if needed <= buf.len() {
            let text = CStr::from_bytes_until_nul(&buf).ok()?;
            return Some(text.to_string_lossy().into_owned());
        }
        // Truncated: the detail is longer than buf; read it again whole.
        buf.resize(needed, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_maps_to_its_kind_and_back() {
        for &(code, kind) in &CODES {
            assert_eq!(ErrorKind::from_code(code), Some(kind), "from_code({code})");
            assert_eq!(kind.code(), code, "{kind:?}.code()");
            assert_ne!(kind.name(), "unknown error", "goindex_strerror({code}) does not know the code of {kind:?}");
        }
        let codes: std::collections::HashSet<_> = CODES.iter().map(|(c, _)| *c).collect();
        assert_eq!(codes.len(), CODES.len(), "CODES repeats a code");
        assert_eq!((sys::EUNAVAILABLE..=sys::EINVAL).count(), CODES.len(), "CODES misses a code in [-15, -1]");
    }

    #[test]
    fn ok_is_no_error_and_unknown_codes_are_kept() {
        assert_eq!(ErrorKind::from_code(0), None, "from_code(GOINDEX_OK)");
        assert_eq!(ErrorKind::from_code(-99), Some(ErrorKind::Unknown(-99)), "from_code(-99)");
        assert_eq!(ErrorKind::Unknown(-99).code(), -99, "Unknown(-99).code()");
        assert_eq!(ErrorKind::Unknown(-99).name(), "unknown error", "Unknown(-99).name()");
    }

    #[test]
    fn a_call_on_an_unknown_handle_names_the_call() {
        // Handle u64::MAX is never issued (handles count up from 1).
        let err = check("goindex_probe", u64::MAX, sys::EHANDLE).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnknownHandle, "kind of {err}");
        assert_eq!(err.detail(), format!("goindex_probe: {} (handle {})", ErrorKind::UnknownHandle.name(), u64::MAX));
        assert!(check("goindex_probe", u64::MAX, sys::OK).is_ok(), "check(OK)");
    }
}
