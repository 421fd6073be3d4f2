//! A loopback HTTP server that records what reached it, and the JavaScript
//! HTTP example copied where a test installs it.

use std::path::{Path, PathBuf};

/// A loopback HTTP server answering `GET /hello`; it stops when dropped.
pub struct Loopback {
    pub port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Each request's `authorization` header, as received.
    authorizations: std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>>,
}

impl Loopback {
    pub fn start() -> Self {
        use std::io::{BufRead, BufReader, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let port = listener.local_addr().expect("address").port();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = std::sync::Arc::clone(&stop);
        let authorizations: std::sync::Arc<std::sync::Mutex<Vec<Option<String>>>> =
            std::sync::Arc::default();
        let seen = std::sync::Arc::clone(&authorizations);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut line = String::new();
                let mut authorization = None;
                while reader.read_line(&mut line).is_ok_and(|read| read > 2) {
                    if let Some((name, value)) = line.split_once(':')
                        && name.eq_ignore_ascii_case("authorization")
                    {
                        authorization = Some(value.trim().to_owned());
                    }
                    line.clear();
                }
                seen.lock().expect("log").push(authorization);
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 19\r\nconnection: close\r\n\r\nhello from loopback",
                );
            }
        });
        Self {
            port,
            stop,
            authorizations,
        }
    }

    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.authorizations.lock().expect("log").clone()
    }
}

impl Drop for Loopback {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// `examples/extensions/fetch-js` copied into `home/fetch-js` (its sources,
/// manifest and lock), with `make setup`'s `node_modules` linked in: the
/// same packages, no second download. Its directory.
pub fn copy_fetch_js(home: &Path) -> PathBuf {
    let example = super::repo("examples/extensions/fetch-js");
    let package = home.join("fetch-js");
    for file in [
        "package.json",
        "package-lock.json",
        "build.mjs",
        "src/tool.js",
        "wit/world.wit",
        "toolhost-extension.toml",
    ] {
        let to = package.join(file);
        std::fs::create_dir_all(to.parent().expect("dir")).expect("dir");
        std::fs::copy(example.join(file), &to).expect(file);
    }
    std::os::unix::fs::symlink(example.join("node_modules"), package.join("node_modules"))
        .expect("node_modules");
    package
}
