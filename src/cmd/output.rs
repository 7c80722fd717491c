//! `-o FILE`: contents written to files, the first to FILE, the next to FILE.2, FILE.3, ...;
//! `-` is stdout, refused when stdout is a terminal (binary data would garble it).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use super::failure::{Kind, fail};

/// Decodes base64 `data` (blobs, images, audio) and writes it with `write_numbered`.
pub fn write_base64(server: &str, output: &Path, data: &[&str]) -> anyhow::Result<()> {
    let mut items = Vec::with_capacity(data.len());
    for text in data {
        match crate::util::base64_decode(text) {
            Some(bytes) => items.push(bytes),
            None => return Err(fail(Kind::Protocol, format!("server {server}: the data is not valid base64"))),
        }
    }
    write_numbered(output, &items)
}

/// Writes each item: the first to `output`, the next to `output.2`, ...
pub fn write_numbered(output: &Path, items: &[Vec<u8>]) -> anyhow::Result<()> {
    let to_stdout = output == Path::new("-");
    if to_stdout && std::io::stdout().is_terminal() {
        return Err(fail(
            Kind::Usage,
            "refusing to write binary contents to a terminal; redirect stdout or give a file name",
        ));
    }
    for (i, bytes) in items.iter().enumerate() {
        if to_stdout {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(bytes)?;
            stdout.flush()?;
            continue;
        }
        let path = if i == 0 { output.to_path_buf() } else { PathBuf::from(format!("{}.{}", output.display(), i + 1)) };
        std::fs::write(&path, bytes).map_err(|e| fail(Kind::Usage, format!("cannot write {}: {e}", path.display())))?;
        eprintln!("nod: wrote {} bytes to {}", bytes.len(), path.display());
    }
    Ok(())
}
