//! Fuzz the stdio frame reader: arbitrary bytes in arbitrary chunks. Frames handed out are
//! complete non-blank lines without line endings, and the buffer never passes the cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nod::jsonrpc::frame::{FrameReader, MAX_FRAME};

fuzz_target!(|data: &[u8]| {
    let Some((&split, rest)) = data.split_first() else { return };
    let chunk = usize::from(split).max(1);
    let mut reader = FrameReader::default();
    for piece in rest.chunks(chunk) {
        let result = reader.push(piece, |frame| {
            assert!(!frame.contains('\n'));
            assert!(frame.len() <= MAX_FRAME);
            let _ = nod::jsonrpc::decode_text(frame, true);
        });
        if result.is_err() {
            return;
        }
        assert!(reader.buffered() <= MAX_FRAME + 1);
    }
    let _ = reader.finish(|_| {});
});
