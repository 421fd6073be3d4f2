//! Talking to one server with rmcp: list its tools, call one. Every
//! exchange starts the server afresh (a child process per refresh or call)
//! and shuts it down after, so no state outlives a call.

use std::process::Stdio;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{ConfigureCommandExt, StreamableHttpClientTransport, TokioChildProcess};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolhost_net::{ClientOptions, TrustRoots};

use crate::error::McpError;
use crate::registry::{Registration, Transport};

/// One tool as the server described it (JSON field names of MCP).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpTool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub input_schema: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub annotations: Value,
}

/// How a call ended, as the reference distinguishes it.
#[derive(Debug, Clone, PartialEq)]
pub enum CallOutcome {
    /// The server answered: the `CallToolResult` as JSON (`isError` may be set).
    Completed(Value),
    /// Nothing reached the server, or it refused the request: safe to say
    /// the call did not happen.
    Failed(McpErrorInfo),
    /// The request was sent and no answer came (timeout, the server died):
    /// whether it acted is unknown. Never retried.
    Unknown(McpErrorInfo),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpErrorInfo {
    pub code: &'static str,
    pub message: String,
}

impl From<McpError> for McpErrorInfo {
    fn from(error: McpError) -> Self {
        let code = error.code();
        let text = error.to_string();
        // The message without the code in front: whoever shows it adds it.
        let message = text
            .strip_prefix(code)
            .and_then(|rest| rest.strip_prefix(": "))
            .unwrap_or(&text)
            .to_owned();
        Self { code, message }
    }
}

/// What a stdio server inherits of toolhost's environment: enough to find
/// its interpreter and locale, never toolhost's secrets (API keys). The
/// registration's own `env` is added on top.
const INHERITED_ENV: [&str; 5] = ["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"];

type Client = RunningService<RoleClient, ()>;

async fn connect(registration: &Registration) -> Result<Client, McpError> {
    let server = registration.display_name.clone();
    let connect_error = |message: String| McpError::Connect {
        server: server.clone(),
        message,
    };
    match &registration.transport {
        Transport::Stdio { command, args, env } => {
            let command = tokio::process::Command::new(command).configure(|c| {
                c.env_clear();
                for key in INHERITED_ENV {
                    if let Some(value) = std::env::var_os(key) {
                        c.env(key, value);
                    }
                }
                c.args(args).envs(env);
            });
            let (transport, _stderr) = TokioChildProcess::builder(command)
                .stderr(Stdio::null())
                .spawn()
                .map_err(|error| connect_error(error.to_string()))?;
            ().serve(transport)
                .await
                .map_err(|error| connect_error(error.to_string()))
        }
        Transport::Http {
            url,
            auth_env,
            ca_file,
        } => {
            // Checked again: the registrations file may have been edited.
            registration.transport.check()?;
            let roots = match ca_file {
                Some(path) => TrustRoots::CaFile(path.clone()),
                None => TrustRoots::System,
            };
            let client = toolhost_net::client(&ClientOptions {
                timeout: None,
                roots,
            })
            .map_err(|error| connect_error(error.to_string()))?;
            // The parsed URL is what is reached: the same one `check` saw.
            let endpoint = toolhost_net::Endpoint::parse(url)
                .map_err(|error| McpError::Invalid(error.to_string()))?;
            let mut config = StreamableHttpClientTransportConfig::with_uri(endpoint.as_str());
            if let Some(name) = auth_env {
                let secret = std::env::var(name).map_err(|_| {
                    connect_error(format!(
                        "the environment variable {name}, which holds its Authorization secret, is not set"
                    ))
                })?;
                config = config.auth_header(secret);
            }
            let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
            match ().serve(transport).await {
                Ok(running) => Ok(running),
                Err(error) => {
                    // rmcp keeps only the text of the HTTP client's error,
                    // which says "error sending request" and not why (a
                    // certificate, a refused connection): ask once more
                    // for the cause.
                    let mut message = toolhost_net::error_chain(&error);
                    if let Err(cause) = client.head(endpoint.as_str()).send().await {
                        message.push_str(": ");
                        message.push_str(&toolhost_net::error_chain(&cause));
                    }
                    Err(connect_error(message))
                }
            }
        }
    }
}

async fn close(client: Client) {
    if let Err(error) = client.cancel().await {
        tracing::debug!(%error, "closing an MCP client");
    }
}

/// The server's tools (every page) and its `serverInfo`.
pub async fn list_tools(
    registration: &Registration,
    timeout: Duration,
) -> Result<(Vec<McpTool>, Value), McpError> {
    let server = registration.display_name.clone();
    let work = async {
        let client = connect(registration).await?;
        let listed = client.list_all_tools().await;
        let info = client
            .peer_info()
            .and_then(|info| serde_json::to_value(&info.server_info).ok())
            .unwrap_or(Value::Null);
        close(client).await;
        let tools = listed.map_err(|error| McpError::Request {
            server: server.clone(),
            message: error.to_string(),
        })?;
        let tools = tools
            .iter()
            .map(|tool| {
                serde_json::to_value(tool)
                    .and_then(serde_json::from_value::<McpTool>)
                    .map_err(|error| McpError::Request {
                        server: server.clone(),
                        message: format!("a tool description does not parse: {error}"),
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((tools, info))
    };
    tokio::time::timeout(timeout, work)
        .await
        .map_err(|_| McpError::Timeout {
            server: registration.display_name.clone(),
            seconds: timeout.as_secs(),
        })?
}

/// Call `name` with `arguments`, at most `timeout` for the whole exchange.
pub async fn call_tool(
    registration: &Registration,
    name: &str,
    arguments: Map<String, Value>,
    timeout: Duration,
) -> CallOutcome {
    let server = registration.display_name.clone();
    let deadline = tokio::time::Instant::now() + timeout;
    let client = match tokio::time::timeout_at(deadline, connect(registration)).await {
        Ok(Ok(client)) => client,
        Ok(Err(error)) => return CallOutcome::Failed(error.into()),
        Err(_) => {
            return CallOutcome::Failed(
                McpError::Timeout {
                    server,
                    seconds: timeout.as_secs(),
                }
                .into(),
            );
        }
    };
    let request = CallToolRequestParams::new(name.to_owned()).with_arguments(arguments);
    let answered = tokio::time::timeout_at(deadline, client.call_tool(request)).await;
    close(client).await;
    match answered {
        Ok(Ok(result)) => {
            CallOutcome::Completed(serde_json::to_value(result).unwrap_or(Value::Null))
        }
        // A JSON-RPC error reply: the server refused, it did not act.
        Ok(Err(rmcp::ServiceError::McpError(error))) => CallOutcome::Failed(
            McpError::Request {
                server,
                message: error.message.to_string(),
            }
            .into(),
        ),
        Ok(Err(error)) => CallOutcome::Unknown(
            McpError::Request {
                server,
                message: error.to_string(),
            }
            .into(),
        ),
        Err(_) => CallOutcome::Unknown(
            McpError::Timeout {
                server,
                seconds: timeout.as_secs(),
            }
            .into(),
        ),
    }
}
