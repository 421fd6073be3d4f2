//! `toolhost commits`: the commits a host-commit run (`toolhost run --commit
//! host`) waits for the chat app to make, and the app's answer to one — the
//! same answer file `POST /v1/runs/{id}/commits/{commitId}` writes
//! (docs/serve.md, "Host commit").

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Subcommand;
use toolhost_runtime::host_commit::{self, AnswerFile, HostAnswer};

#[derive(Subcommand)]
pub enum CommitsCommand {
    /// The commits a run waits for the chat app to make: id, the message
    /// it rewrites, the text.
    List {
        run_dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Answer a waiting commit: `--committed INDEX` (the app saved it as
    /// that message) or `--failed MESSAGE` (it did not; the model reads why).
    Answer {
        run_dir: PathBuf,
        commit_id: String,
        #[arg(
            long,
            value_name = "INDEX",
            conflicts_with = "failed",
            required_unless_present = "failed"
        )]
        committed: Option<u32>,
        #[arg(long, value_name = "MESSAGE")]
        failed: Option<String>,
    },
}

pub fn run(command: CommitsCommand) -> Result<ExitCode> {
    match command {
        CommitsCommand::List { run_dir, json } => {
            let pending = host_commit::pending(&run_dir)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&pending)?);
                return Ok(ExitCode::SUCCESS);
            }
            if pending.is_empty() {
                println!("no commit waits for the chat app");
            }
            for commit in pending {
                let request = &commit.request;
                println!(
                    "{}  {}  {} characters{}",
                    request["commitId"].as_str().unwrap_or_default(),
                    match request["runMessage"].as_u64() {
                        Some(index) => format!("rewrites message {index}"),
                        None => "a new message".to_owned(),
                    },
                    request["chars"],
                    if commit.answered { "  (answered)" } else { "" },
                );
                println!("{}\n", request["text"].as_str().unwrap_or_default());
            }
            Ok(ExitCode::SUCCESS)
        }
        CommitsCommand::Answer {
            run_dir,
            commit_id,
            committed,
            failed,
        } => {
            let answer = match (committed, failed) {
                (Some(message_index), None) => HostAnswer::Committed { message_index },
                (None, Some(message)) => HostAnswer::Failed { message },
                _ => bail!("give --committed INDEX or --failed MESSAGE"),
            };
            let file = AnswerFile::new(&commit_id, answer, "toolhost commits answer");
            host_commit::answer_waiting(&run_dir, &file)?;
            println!("answered {commit_id}");
            Ok(ExitCode::SUCCESS)
        }
    }
}
