//! Handle lifecycle, as one ordered run of named steps (no libtest harness,
//! so that the last step sees every handle this process ever opened): open
//! and drop on one thread and across threads, a thread that panics while
//! holding an indexer, failed opens, close; and at the end no handle is
//! left open. Handles count up from 1 per process and are never reused, so
//! "every id below the last one issued is closed" is the whole check.

mod common;

use std::sync::{Arc, Barrier};
use std::thread;

use common::*;
use goindex_dynamo::*;

/// Steps runs the named steps in order and reports the failing one.
struct Steps {
    last_handle: u64,
}

impl Steps {
    fn run(&mut self, name: &str, f: impl FnOnce(&mut Steps)) {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self)));
        if result.is_err() {
            eprintln!("tests/lifecycle: FAIL [{name}]");
            std::process::exit(1);
        }
        println!("tests/lifecycle: ok [{name}]");
    }

    /// open opens an index and checks handles only grow.
    fn open(&mut self, config: &str) -> Indexer {
        let ix = open(config);
        assert!(ix.handle() > self.last_handle, "handle {} after {}", ix.handle(), self.last_handle);
        self.last_handle = ix.handle();
        ix
    }
}

fn exercise(ix: &Indexer, worker: u64) {
    apply(ix, &stored(w(worker), &[], &[1, 2, 3]));
    let got = scores(ix, &[1, 2, 3]);
    assert!(got.contains(&((worker, 0), 3)), "worker {worker} missing from {got:?}");
    ix.find_matches_for_request(&[7; 64], None).expect("find_matches_for_request");
}

fn main() {
    let mut s = Steps { last_handle: 0 };

    s.run("the first handle of the process is 1", |s| {
        let ix = s.open("{}");
        assert_eq!(ix.handle(), 1, "first handle");
    });

    s.run("open, use and drop on one thread", |s| {
        for i in 0..5 {
            let ix = s.open(r#"{"mode": "exact"}"#);
            exercise(&ix, i);
            let h = ix.handle();
            drop(ix);
            assert!(!is_open(h), "handle {h} open after drop");
        }
    });

    s.run("an indexer shared by threads closes with its last owner", |s| {
        let ix = Arc::new(s.open(r#"{"mode": "ckf", "lanes": 8, "expected_blocks_per_lane": 256}"#));
        let h = ix.handle();
        // The threads keep their clones until main has dropped its own.
        let dropped = Arc::new(Barrier::new(5));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (ix, dropped) = (Arc::clone(&ix), Arc::clone(&dropped));
                thread::spawn(move || {
                    exercise(&ix, t);
                    dropped.wait();
                })
            })
            .collect();
        drop(ix);
        assert!(is_open(h), "handle {h} closed while threads still own it");
        dropped.wait();
        for t in threads {
            t.join().expect("a thread panicked");
        }
        assert!(!is_open(h), "handle {h} open after its last owner finished");
    });

    s.run("an indexer moved into a thread that panics is closed by unwinding", |s| {
        let ix = s.open("{}");
        let h = ix.handle();
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let joined = thread::spawn(move || {
            exercise(&ix, 0);
            panic!("deliberate");
        })
        .join();
        std::panic::set_hook(hook);
        assert!(joined.is_err(), "the thread did not panic");
        assert!(!is_open(h), "handle {h} open after the panicking thread unwound");
    });

    s.run("failed opens issue no handle", |s| {
        let before = s.last_handle;
        for config in ["{", r#"{"mode": "global", "dcs": [1, 1]}"#, r#"{"lanes": 0}"#] {
            let err = Indexer::open(config).expect_err(config);
            assert!(!err.detail().is_empty(), "open({config}): empty detail");
        }
        let ix = s.open("{}");
        assert_eq!(ix.handle(), before + 1, "the handle after three failed opens");
    });

    s.run("close reports success and releases", |s| {
        let ix = s.open("{}");
        let h = ix.handle();
        ix.close().expect("close");
        assert!(!is_open(h), "handle {h} open after close");
    });

    s.run("the end: no handle is left open", |s| {
        let ix = s.open("{}");
        let last = ix.handle();
        let open: Vec<u64> = (1..last).filter(|&h| is_open(h)).collect();
        assert!(open.is_empty(), "handles still open: {open:?} of 1..{last}");
        drop(ix);
        assert!(!is_open(last), "handle {last} open after drop");
    });
}
