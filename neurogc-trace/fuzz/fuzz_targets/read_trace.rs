//! Any bytes, as a recording or a --json stream: the reader must return records or an error,
//! never panic, hang or allocate without bound. Run with `cargo xtask fuzz`.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = neurogc_trace::TraceReader::new(data) else { return };
    // A record per input byte at most: anything more would mean the reader is not advancing.
    for _ in 0..=data.len() {
        match reader.next() {
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
    panic!("more records than input bytes");
});
