//! `cargo run -p embed-host`: run the example agent and print the chat.

use std::sync::Arc;

use embed_host::{MemoryChat, run_agent};

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("embed-host-{}", std::process::id()));
    let chat = Arc::new(MemoryChat::default());
    let summary = run_agent(&dir, Arc::clone(&chat)).await?;
    println!(
        "status: {:?}, {} rounds, {} calls",
        summary.status, summary.rounds, summary.tool_calls
    );
    for message in chat.messages() {
        println!("chat: {message}");
    }
    println!("journal: toolhost journal {}", dir.display());
    Ok(())
}
