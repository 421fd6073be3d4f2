//! `toolhost replay`: re-execute an ended run's calls in a scratch copy
//! against its record and report, call by call, whether each result is
//! byte-identical (`toolhost_runtime::replay_run`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use toolhost_runtime::{CallVerdict, ToolHost, replay_run};

/// Exit 0 when every call executed again gave its stored result, 1 when one
/// did not.
pub async fn replay(
    host: &ToolHost,
    run_dir: &Path,
    scratch: Option<PathBuf>,
    json: bool,
) -> Result<ExitCode> {
    let (scratch, keep) = match scratch {
        Some(dir) => (dir, true),
        None => (
            std::env::temp_dir().join(format!("toolhost-replay-{}", uuid::Uuid::new_v4().simple())),
            false,
        ),
    };
    if scratch.exists() && std::fs::read_dir(&scratch)?.next().is_some() {
        anyhow::bail!(
            "{} is not empty: replay needs an empty scratch directory",
            scratch.display()
        );
    }
    let report = replay_run(host, run_dir, &scratch)
        .await
        .with_context(|| format!("replaying {}", run_dir.display()));
    if !keep {
        let _ = std::fs::remove_dir_all(&scratch);
    }
    let report = report?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let rows: Vec<[String; 5]> = report
            .calls
            .iter()
            .map(|call| {
                let (verdict, detail) = match &call.verdict {
                    CallVerdict::Identical => ("identical", String::new()),
                    CallVerdict::Different { now, .. } => {
                        ("DIFFERENT", now.chars().take(120).collect())
                    }
                    CallVerdict::FromRecord { reason } => ("from record", reason.clone()),
                };
                let who = call
                    .invocation_id
                    .strip_prefix("inv_")
                    .map_or(call.invocation_id.as_str(), |id| &id[..id.len().min(8)])
                    .to_owned();
                [
                    call.seq.to_string(),
                    who,
                    call.tool_id.clone(),
                    verdict.to_owned(),
                    detail,
                ]
            })
            .collect();
        crate::table::print(["SEQ", "AGENT", "TOOL", "RESULT", "DETAIL"], &rows);
        println!(
            "{}: {} identical, {} different, {} from the record{}",
            report.run_id,
            report.identical,
            report.different,
            report.from_record,
            if keep {
                format!(" (scratch copy: {})", scratch.display())
            } else {
                String::new()
            }
        );
    }
    Ok(if report.different == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
