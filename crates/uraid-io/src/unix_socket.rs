//! Unix socket files a server listens on (the control socket, NBD's): one left behind by a
//! server that died is replaced, as a restart after a crash needs; a live one, or anything
//! that is not a socket, is refused. Before the fourth session of 2026-12-06 only the control
//! socket did this, and `serve --unix` after a crash failed with "Address already in use".

use std::fs;
use std::io::{self, ErrorKind};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Removes `path` if it is a socket nobody answers on; Ok if it does not exist. Refused
/// (`AddrInUse`) where a server answers, and (`AlreadyExists`) where it is not a socket.
pub fn remove_stale(path: &Path) -> io::Result<()> {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    if !meta.file_type().is_socket() {
        let why = format!("{} exists and is not a socket; not replacing it", path.display());
        return Err(io::Error::new(ErrorKind::AlreadyExists, why));
    }
    if UnixStream::connect(path).is_ok() {
        let why = format!("a server already answers on {}", path.display());
        return Err(io::Error::new(ErrorKind::AddrInUse, why));
    }
    fs::remove_file(path)
}

#[cfg(test)]
mod tests {
    use super::remove_stale;
    use std::io::ErrorKind;
    use std::os::unix::net::UnixListener;

    #[test]
    fn a_dead_socket_goes_a_live_one_and_a_file_stay() {
        let dir = std::env::temp_dir().join(format!("uraid-sock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        remove_stale(&path).unwrap();
        drop(UnixListener::bind(&path).unwrap());
        remove_stale(&path).unwrap();
        assert!(!path.exists(), "nobody answered: removed");
        let live = UnixListener::bind(&path).unwrap();
        assert_eq!(remove_stale(&path).unwrap_err().kind(), ErrorKind::AddrInUse);
        drop(live);
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"data").unwrap();
        assert_eq!(remove_stale(&path).unwrap_err().kind(), ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&path).unwrap(), b"data");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
