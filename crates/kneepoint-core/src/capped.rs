//! Whole-file reads with a size cap, for the files a user names and kneepoint reads whole (a
//! model's `config.json`, an instance catalog, a config file, a run's saved summaries):
//! `/dev/zero`, a pipe that never ends or a file with a huge tail is refused with the cap
//! named, before it can take the machine's memory.
//!
//! A regular file's size is checked before anything is read; anything else (a device, a
//! pipe) is read up to one byte past the cap. The error is an [`std::io::Error`] of kind
//! [`std::io::ErrorKind::FileTooLarge`], so every caller keeps its own error type and puts
//! the path in front: `reading the model config /dev/zero: larger than 16 MiB, the most read`.

use std::io::Read as _;
use std::path::Path;

/// The most read of a settings file: a model's `config.json`, an instance catalog, a price
/// table, a TOML or JSON config file. Real ones are a few KB (a Hugging Face `config.json`
/// of a large multimodal model is under 100 KB); 16 MiB is over a hundred times that.
pub const MAX_SETTINGS_BYTES: u64 = 16 << 20;

/// The most read of a run's saved JSON document: a sweep's, search's or recommendation's
/// summary, a level's `profile_export_aiperf.json`, its time slices or its server metrics.
/// They grow with the levels, probes and scrapes of a run (tens of KB each): even a search of
/// thousands of probes or a day of scrapes stays in the tens of MB, and 256 MiB bounds the
/// memory a damaged or hostile folder can take while leaving room for every real one.
pub const MAX_DOCUMENT_BYTES: u64 = 256 << 20;

/// `bytes` as a reader says it: `16 MiB`, `64 KiB`, `1000 bytes`.
pub fn size_text(bytes: u64) -> String {
    const KIB: u64 = 1 << 10;
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if bytes >= GIB && bytes.is_multiple_of(GIB) {
        format!("{} GiB", bytes / GIB)
    } else if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes.is_multiple_of(KIB) {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} bytes")
    }
}

/// The error of a file past `max` bytes: kind [`std::io::ErrorKind::FileTooLarge`], message
/// `larger than 16 MiB, the most read`.
pub fn too_large(max: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::FileTooLarge,
        format!("larger than {}, the most read", size_text(max)),
    )
}

/// Reads the whole file at `path`, refusing it with [`too_large`] when it holds more than
/// `max` bytes (see the module's documentation). Other failures are the operating system's.
pub fn read_capped(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    // A regular file says its size: one past the cap is refused without reading a byte (a
    // sparse file of a terabyte costs nothing). Devices and pipes say 0 and are read.
    let len = file
        .metadata()
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map_or(0, |m| m.len());
    if len > max {
        return Err(too_large(max));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(max.saturating_add(1)).read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > max {
        return Err(too_large(max));
    }
    Ok(bytes)
}

/// [`read_capped`] for text: bytes that are not UTF-8 are an error of kind
/// [`std::io::ErrorKind::InvalidData`], as [`std::fs::read_to_string`] makes them.
pub fn read_capped_to_string(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read_capped(path, max)?)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch folder of this test process, removed when dropped.
    struct Scratch(std::path::PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("kneepoint-core-{name}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn sizes_read_as_a_reader_says_them() {
        assert_eq!(size_text(MAX_SETTINGS_BYTES), "16 MiB");
        assert_eq!(size_text(MAX_DOCUMENT_BYTES), "256 MiB");
        assert_eq!(size_text(1 << 30), "1 GiB");
        assert_eq!(size_text(64 << 10), "64 KiB");
        assert_eq!(size_text(1000), "1000 bytes");
        assert_eq!(size_text(0), "0 bytes");
    }

    /// Issue 57 item 11: a file one byte past the cap is refused with the cap named, and one
    /// at the cap is read whole (sparse files: no disk is spent).
    #[test]
    fn a_file_past_the_cap_is_refused_naming_the_cap() {
        let dir = Scratch::new("capped");
        let path = dir.0.join("big.json");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(MAX_SETTINGS_BYTES + 1).unwrap();
        let e = read_capped(&path, MAX_SETTINGS_BYTES).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        assert_eq!(e.to_string(), "larger than 16 MiB, the most read");
        let e = read_capped_to_string(&path, MAX_SETTINGS_BYTES).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        f.set_len(4096).unwrap();
        assert_eq!(read_capped(&path, 4096).unwrap().len(), 4096);
        assert_eq!(
            read_capped(&path, 4095).unwrap_err().to_string(),
            "larger than 4095 bytes, the most read"
        );
        std::fs::write(&path, [0xff, 0xfe]).unwrap();
        let e = read_capped_to_string(&path, 16).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        std::fs::write(&path, "{}").unwrap();
        assert_eq!(read_capped_to_string(&path, 16).unwrap(), "{}");
        let e = read_capped(&dir.0.join("missing"), 16).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }

    /// Issue 57 item 11: a device that never ends (`/dev/zero`) is read only to the cap, fast.
    #[cfg(unix)]
    #[test]
    fn dev_zero_is_refused_at_the_cap_quickly() {
        let start = std::time::Instant::now();
        let e = read_capped(Path::new("/dev/zero"), MAX_SETTINGS_BYTES).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        assert!(e.to_string().contains("16 MiB"), "{e}");
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }
}
