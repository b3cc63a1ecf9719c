//! A file system that records what a storage device would see: files created, appended to, cut
//! short and deleted, as [`FileEvent`] lines for the simulator's FTL model to replay
//! (`docs/scale.md`).

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use strata_exec::file_event::FileEvent;

/// The trace and the numbers given to the files it names.
struct Recorder {
    sink: Box<dyn Write + Send>,
    ids: HashMap<PathBuf, u64>,
    next: u64,
    /// The first error writing the trace: recording stops, the file system goes on.
    failed: Option<String>,
    /// Appends to one file not yet written out: consecutive appends to the same file (a WAL's
    /// records, a table's blocks) make one event, which keeps a WAL-heavy trace small.
    pending: Option<(u64, u64)>,
}

impl Recorder {
    fn emit(&mut self, event: FileEvent) {
        if let FileEvent::Append(id, bytes) = event {
            match &mut self.pending {
                Some((p, b)) if *p == id => *b += bytes,
                _ => {
                    self.write_pending();
                    self.pending = Some((id, bytes));
                }
            }
            return;
        }
        self.write_pending();
        self.write(event);
    }

    fn write_pending(&mut self) {
        if let Some((id, bytes)) = self.pending.take() {
            self.write(FileEvent::Append(id, bytes));
        }
    }

    fn write(&mut self, event: FileEvent) {
        if self.failed.is_none() {
            if let Err(e) = writeln!(self.sink, "{event}") {
                self.failed = Some(e.to_string());
            }
        }
    }

    /// A new number for `path`; a file it replaces is deleted first.
    fn create(&mut self, path: &Path) -> u64 {
        if let Some(old) = self.ids.remove(path) {
            self.emit(FileEvent::Delete(old));
        }
        let id = self.next;
        self.next += 1;
        self.ids.insert(path.to_path_buf(), id);
        self.emit(FileEvent::Create(id));
        id
    }
}

/// Wraps a file system and writes every create, append, truncate, rename and delete to a trace
/// ([`strata_exec::file_event`]). Files present before recording starts are not in the trace:
/// record from an empty directory. Reads are not recorded (a device's GC does not see them).
/// A failed trace write stops the recording, not the database ([`RecordingFs::trace_error`]).
#[derive(Clone)]
pub struct RecordingFs {
    inner: Arc<dyn FileSystem>,
    recorder: Arc<Mutex<Recorder>>,
}

impl fmt::Debug for RecordingFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordingFs")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl RecordingFs {
    /// Records `inner`'s file changes into `sink`.
    pub fn new(inner: Arc<dyn FileSystem>, sink: Box<dyn Write + Send>) -> Self {
        RecordingFs {
            inner,
            recorder: Arc::new(Mutex::new(Recorder {
                sink,
                ids: HashMap::new(),
                next: 0,
                failed: None,
                pending: None,
            })),
        }
    }

    /// Writes out what is pending and flushes the trace (dropping the last handle does too).
    pub fn flush_trace(&self) -> io::Result<()> {
        let mut r = self.recorder.lock();
        r.write_pending();
        r.sink.flush()
    }

    /// Why recording stopped, if a trace write failed.
    pub fn trace_error(&self) -> Option<String> {
        self.recorder.lock().failed.clone()
    }

    fn wrap(&self, path: &Path, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        let id = self.recorder.lock().create(path);
        Box::new(RecordedFile {
            inner: file,
            id,
            recorder: Arc::clone(&self.recorder),
        })
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.write_pending();
        let _ = self.sink.flush();
    }
}

/// A file being written, whose appends are recorded.
struct RecordedFile {
    inner: Box<dyn WritableFile>,
    id: u64,
    recorder: Arc<Mutex<Recorder>>,
}

impl WritableFile for RecordedFile {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.inner.append(data)?;
        if !data.is_empty() {
            self.recorder
                .lock()
                .emit(FileEvent::Append(self.id, data.len() as u64));
        }
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> io::Result<()> {
        self.inner.sync()
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn start_writeback(&mut self) -> io::Result<()> {
        self.inner.start_writeback()
    }
}

impl FileSystem for RecordingFs {
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = self.inner.create(path)?;
        Ok(self.wrap(path, file))
    }
    fn create_mapped(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = self.inner.create_mapped(path)?;
        Ok(self.wrap(path, file))
    }
    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = self.inner.create_direct(path)?;
        Ok(self.wrap(path, file))
    }
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path)
    }
    fn open_direct(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_direct(path)
    }
    fn read_batch(&self, reads: Vec<super::BatchRead>) -> Vec<io::Result<Vec<u8>>> {
        self.inner.read_batch(reads)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.inner.rename(from, to)?;
        let mut r = self.recorder.lock();
        if let Some(replaced) = r.ids.remove(to) {
            r.emit(FileEvent::Delete(replaced));
        }
        if let Some(id) = r.ids.remove(from) {
            r.ids.insert(to.to_path_buf(), id);
        }
        Ok(())
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.inner.remove_file(path)?;
        let mut r = self.recorder.lock();
        if let Some(id) = r.ids.remove(path) {
            r.emit(FileEvent::Delete(id));
        }
        Ok(())
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        self.inner.truncate(path, len)?;
        let mut r = self.recorder.lock();
        if let Some(&id) = r.ids.get(path) {
            r.emit(FileEvent::Truncate(id, len));
        }
        Ok(())
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn list(&self, path: &Path) -> io::Result<Vec<String>> {
        self.inner.list(path)
    }
    fn file_size(&self, path: &Path) -> io::Result<u64> {
        self.inner.file_size(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.inner.sync_dir(path)
    }
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;

    /// A sink the test can read back.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn creates_appends_renames_truncates_and_deletes_are_recorded() {
        let sink = Shared::default();
        let fs = RecordingFs::new(Arc::new(MemFs::new()), Box::new(sink.clone()));
        let (a, b) = (Path::new("/d/a"), Path::new("/d/b"));
        fs.create_dir_all(Path::new("/d")).unwrap();
        let mut f = fs.create(a).unwrap();
        f.append(b"hel").unwrap();
        f.append(b"").unwrap();
        f.append(b"lo").unwrap();
        drop(f);
        let mut g = fs.create(b).unwrap();
        g.append(&[0; 100]).unwrap();
        drop(g);
        fs.truncate(b, 10).unwrap();
        // a replaces b: b's file goes, a's number moves to b's name.
        fs.rename(a, b).unwrap();
        fs.remove_file(b).unwrap();
        // Reads are not device writes.
        assert!(fs.read(b).is_err());
        fs.flush_trace().unwrap();
        let text = String::from_utf8(sink.0.lock().clone()).unwrap();
        assert_eq!(text, "c 0\na 0 5\nc 1\na 1 100\nt 1 10\nd 1\nd 0\n");
        assert_eq!(fs.trace_error(), None);
    }
}
