//! `GET /v1/runs/{id}/files/{path}`: what a run wrote, for a UI or an
//! audit. Only a fixed list is readable: the workspace roots, the audit
//! directories and the journal; never `run.json`, `input/` or anything
//! hidden. Every path is opened beneath the run directory with the
//! workspace's rules (`openat2`: no symbolic link, no `..`, no mount
//! crossed). A file is streamed; a directory answers its entries.

use std::os::fd::AsFd;
use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rustix::fs::{FileType, Mode, OFlags};
use serde::Serialize;
use tokio::io::AsyncReadExt as _;
use toolhost_core::beneath::{DIR_FLAGS, READ_FLAGS, Refusal, open_beneath};
use toolhost_core::profile::WORKSPACE_ROOTS;
use toolhost_journal::layout::{
    JOURNAL_FILE, MODEL_RESPONSES_DIR, TOOL_ARGS_DIR, TOOL_RESULTS_DIR,
};

use super::read_root;
use crate::ServeState;
use crate::error::ApiError;
use crate::tokens::Tenant;

/// Most entries a directory listing answers.
const MAX_ENTRIES: usize = 1000;
/// Bytes per streamed chunk.
const CHUNK_BYTES: usize = 64 * 1024;

/// A directory's entries.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Listing {
    pub path: String,
    pub entries: Vec<Entry>,
    /// More entries than [`MAX_ENTRIES`] were there.
    pub truncated: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Entry {
    pub name: String,
    /// `file`, `dir` or `other`.
    pub kind: &'static str,
}

/// Whether `path` is one a client may read: under a workspace root or an
/// audit directory, or the journal; plain segments only.
fn readable(path: &str) -> bool {
    let segments: Vec<&str> = path.split('/').collect();
    let plain = segments.iter().all(|segment| {
        !segment.is_empty() && *segment != "." && *segment != ".." && !segment.contains('\0')
    });
    let first = segments.first().copied().unwrap_or_default();
    plain
        && (WORKSPACE_ROOTS.contains(&first)
            || [TOOL_RESULTS_DIR, TOOL_ARGS_DIR, MODEL_RESPONSES_DIR].contains(&first)
            || path == JOURNAL_FILE)
}

/// Read a run's file or list one of its directories.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/files/{path}",
    params(
        ("id" = String, Path, description = "The run id"),
        ("path" = String, Path, description = "Under output/, scratch/, plan/, summaries/, persist/, tool-results/, tool-args/, model-responses/; or events.jsonl"),
    ),
    responses(
        (status = 200, description = "The file's bytes, or a directory's entries (JSON)"),
        (status = 403, description = "Not a readable path, or a link on the way", body = ApiError),
        (status = 404, description = "No such run of this tenant, or no such file", body = ApiError),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn file(
    State(state): State<Arc<ServeState>>,
    Extension(Tenant(tenant)): Extension<Tenant>,
    UrlPath((id, path)): UrlPath<(String, String)>,
) -> Result<Response, ApiError> {
    let root = read_root(&state, &tenant, &id).await?.root;
    let path = path.trim_end_matches('/').to_owned();
    if !readable(&path) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "serve.path_refused",
            "readable: output/, scratch/, plan/, summaries/, persist/, tool-results/, tool-args/, model-responses/ and events.jsonl",
        ));
    }
    let opened = tokio::task::spawn_blocking(move || open(&root, &path))
        .await
        .map_err(|error| ApiError::internal("opening the file", error))??;
    match opened {
        Opened::Listing(listing) => Ok(axum::Json(listing).into_response()),
        Opened::File { file, content_type } => {
            let file = tokio::fs::File::from_std(file);
            let stream = futures_util::stream::unfold(file, |mut file| async move {
                let mut chunk = vec![0; CHUNK_BYTES];
                match file.read(&mut chunk).await {
                    Ok(0) => None,
                    Ok(read) => {
                        chunk.truncate(read);
                        Some((Ok::<_, std::io::Error>(chunk), file))
                    }
                    Err(error) => Some((Err(error), file)),
                }
            });
            let mut response = Body::from_stream(stream).into_response();
            let headers = response.headers_mut();
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
            headers.insert(
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            );
            Ok(response)
        }
    }
}

enum Opened {
    Listing(Listing),
    File {
        file: std::fs::File,
        content_type: &'static str,
    },
}

fn open(root: &std::path::Path, path: &str) -> Result<Opened, ApiError> {
    let dir = rustix::fs::open(root, DIR_FLAGS | OFlags::NOFOLLOW, Mode::empty())
        .map_err(|error| ApiError::internal("opening the run directory", error))?;
    let fd = open_beneath(dir.as_fd(), path, READ_FLAGS, Mode::empty()).map_err(|errno| {
        match Refusal::of(errno) {
            Refusal::Missing | Refusal::NotDirectory => ApiError::not_found("such file"),
            Refusal::Link | Refusal::Escape => ApiError::new(
                StatusCode::FORBIDDEN,
                "workspace.symlink_found",
                "the path passes through a symbolic link or leaves the run",
            ),
            Refusal::Unsupported | Refusal::Other(_) => {
                ApiError::internal("opening the file", errno)
            }
        }
    })?;
    let stat =
        rustix::fs::fstat(&fd).map_err(|error| ApiError::internal("reading the file", error))?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => Ok(Opened::File {
            file: std::fs::File::from(fd),
            content_type: content_type(path),
        }),
        FileType::Directory => {
            let mut entries = Vec::new();
            let mut truncated = false;
            let listed = rustix::fs::Dir::read_from(&fd)
                .map_err(|error| ApiError::internal("listing the directory", error))?;
            for entry in listed {
                let entry =
                    entry.map_err(|error| ApiError::internal("listing the directory", error))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if name == "." || name == ".." {
                    continue;
                }
                if entries.len() == MAX_ENTRIES {
                    truncated = true;
                    break;
                }
                let kind = match entry.file_type() {
                    FileType::RegularFile => "file",
                    FileType::Directory => "dir",
                    _ => "other",
                };
                entries.push(Entry { name, kind });
            }
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(Opened::Listing(Listing {
                path: path.to_owned(),
                entries,
                truncated,
            }))
        }
        other => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "serve.path_refused",
            format!(
                "the path is {}",
                toolhost_core::beneath::special_kind(other)
            ),
        )),
    }
}

fn content_type(path: &str) -> &'static str {
    if path.ends_with(".jsonl") {
        "application/x-ndjson"
    } else if path.ends_with(".json") {
        "application/json"
    } else if path.ends_with(".md") || path.ends_with(".txt") {
        "text/plain; charset=utf-8"
    } else {
        "application/octet-stream"
    }
}

#[cfg(test)]
mod tests {
    use super::readable;

    #[test]
    fn only_the_listed_entries_are_readable() {
        for ok in [
            "output/main.md",
            "tool-results",
            "tool-results/call_1.json",
            "events.jsonl",
            "persist/a/b",
        ] {
            assert!(readable(ok), "{ok}");
        }
        for refused in [
            "run.json",
            "input/resolved_profile.json",
            ".tmp/x",
            "output/../run.json",
            "",
            "/etc/passwd",
            "output//x",
            "events.jsonl/x",
        ] {
            assert!(!readable(refused), "{refused}");
        }
    }
}
