//! Sessions of one workspace racing on the same file: compare-and-swap
//! refuses the loser, and no acknowledged write is ever lost.

mod common;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::Fixture;
use toolhost_workspace::{WorkspaceSession, WriteMode, codes};

const PATH: &str = "output/shared.md";

#[test]
fn the_second_replace_of_a_version_is_stale() {
    let fixture = Fixture::new();
    fixture.write(PATH, "original\n");
    let a = fixture.session();
    let b = fixture.session();
    for session in [&a, &b] {
        let file = session.read_text(PATH).unwrap();
        session.record_read(PATH, &file.sha256, None).unwrap();
    }
    a.write(PATH, "from A\n", WriteMode::Replace).unwrap();
    let error = b.write(PATH, "from B\n", WriteMode::Replace).unwrap_err();
    assert_eq!(error.code(), codes::WRITE_STALE_FILE);
    assert!(error.is_recoverable());
    assert_eq!(fixture.read(PATH), "from A\n");
    let error = b.patch(PATH, "original", "B", false).unwrap_err();
    assert_eq!(error.code(), codes::PATCH_STALE_FILE);
    assert_eq!(fixture.read(PATH), "from A\n");
    assert!(fixture.temp_files().is_empty());
}

#[test]
fn racing_replaces_of_one_version_let_exactly_one_win() {
    let fixture = Fixture::new();
    fixture.write(PATH, "base\n");
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|index| {
            let session = fixture.session();
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                let file = session.read_text(PATH).unwrap();
                session.record_read(PATH, &file.sha256, None).unwrap();
                barrier.wait();
                session
                    .write(PATH, &format!("writer {index}\n"), WriteMode::Replace)
                    .map(|_| index)
                    .map_err(|error| error.code())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let winners: Vec<usize> = results
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    for result in &results {
        if let Err(code) = result {
            assert_eq!(*code, codes::WRITE_STALE_FILE);
        }
    }
    assert_eq!(fixture.read(PATH), format!("writer {}\n", winners[0]));
}

/// Appenders and read-modify-write replacers through different sessions:
/// every acknowledged append and every acknowledged replace marker is in
/// the final file.
#[test]
fn no_acknowledged_write_is_lost() {
    let fixture = Fixture::new();
    let appenders = 4;
    let appends = 40;
    let replacers = 2;
    let replaces = 15;
    let barrier = Arc::new(Barrier::new(appenders + replacers));
    let mut handles = Vec::new();
    for thread_index in 0..appenders {
        let session = fixture.session();
        let barrier = Arc::clone(&barrier);
        handles.push(thread::spawn(move || {
            barrier.wait();
            let mut acknowledged = Vec::new();
            for index in 0..appends {
                let token = format!("[a{thread_index}-{index}]");
                session.write(PATH, &token, WriteMode::Append).unwrap();
                acknowledged.push(token);
            }
            (acknowledged, 0)
        }));
    }
    for thread_index in 0..replacers {
        let session: WorkspaceSession = fixture.session();
        let barrier = Arc::clone(&barrier);
        handles.push(thread::spawn(move || {
            barrier.wait();
            let mut acknowledged = Vec::new();
            let mut stale = 0;
            for index in 0..replaces {
                let token = format!("[r{thread_index}-{index}]");
                loop {
                    let Ok(file) = session.read_text(PATH) else {
                        // Not created yet.
                        thread::yield_now();
                        continue;
                    };
                    match session.record_read(PATH, &file.sha256, None) {
                        Ok(()) => {}
                        Err(error) if error.code() == codes::READ_STALE_FILE => {
                            stale += 1;
                            continue;
                        }
                        Err(error) => panic!("{error}"),
                    }
                    // Give the appenders a chance to get in between.
                    thread::sleep(Duration::from_micros(300));
                    let next = format!("{}{token}", file.text);
                    match session.write(PATH, &next, WriteMode::Replace) {
                        Ok(_) => break,
                        Err(error) if error.code() == codes::WRITE_STALE_FILE => stale += 1,
                        Err(error) => panic!("{error}"),
                    }
                }
                acknowledged.push(token);
            }
            eprintln!("replacer {thread_index}: {stale} stale attempts retried");
            (acknowledged, stale)
        }));
    }
    let mut acknowledged: Vec<String> = Vec::new();
    let mut stale = 0;
    for handle in handles {
        let (tokens, retried) = handle.join().unwrap();
        acknowledged.extend(tokens);
        stale += retried;
    }
    // The race really happened: some replaces were refused as stale and
    // retried (appenders write continuously while a replacer waits).
    assert!(stale > 0, "no replace was ever stale");
    assert_eq!(
        acknowledged.len(),
        appenders * appends + replacers * replaces
    );
    let text = fixture.read(PATH);
    for token in &acknowledged {
        assert_eq!(text.matches(token.as_str()).count(), 1, "{token} in {text}");
    }
    assert!(fixture.temp_files().is_empty());
}
