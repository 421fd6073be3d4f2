//! The executor behind the catalog: a call goes to its entry's source — the
//! sandbox for a builtin or a granted extension (its grant rechecked as it
//! is now), or an MCP server (its registration rechecked as it is now).

use toolhost_capabilities::CallGrant;
use toolhost_core::allowed_hosts::AllowedHosts;
use toolhost_core::{
    AgentToolResult, ToolBinding, ToolCall, ToolFailure, ToolId, ToolOutcome, ToolSuccess,
};
use toolhost_mcp::{CallOutcome, McpRegistry, Permission, State};
use toolhost_sandbox::{CallEntropy, LimitOverrides};
use uuid::Uuid;

use super::{Entry, MCP_MAX_ARGUMENT_BYTES, ToolHost, ToolSource};
use crate::executor::{CallContext, ExecuteError, Execution, ToolExecutor};
use crate::readable_view::ResultViews;

impl ToolHost {
    /// Run one call outside any snapshot, under the tool's own
    /// limits. Tool errors and sandbox failures are results the model reads;
    /// only a missing executor or an identity mismatch is a system failure.
    pub async fn call(
        &self,
        call: &ToolCall,
        entropy: CallEntropy,
    ) -> Result<Execution, ExecuteError> {
        self.dispatch(call, None, entropy, CallContext::default())
            .await
    }

    async fn dispatch(
        &self,
        call: &ToolCall,
        overrides: Option<&LimitOverrides>,
        entropy: CallEntropy,
        context: CallContext,
    ) -> Result<Execution, ExecuteError> {
        let bound = &context.bound;
        let entry = self
            .entries
            .get(&call.tool_id)
            .ok_or_else(|| ExecuteError::UnknownTool(call.tool_id.clone()))?;
        let mut tool_results = true;
        let mut allowed_hosts = AllowedHosts::none();
        let mut secrets = Vec::new();
        let component = match entry {
            Entry::Component {
                component,
                source: ToolSource::Extension { id, registry, .. },
            } => {
                // The grant as it is now, not as it was when the host loaded:
                // a revoke or an upgrade takes effect at the next call.
                let uses = component.imported_capabilities();
                let grant = match crate::extensions::recheck(
                    registry,
                    id,
                    component.sha256_hex(),
                    &uses,
                    bound.grant_profile(),
                ) {
                    Ok(grant) => grant,
                    Err((code, message)) => return Ok(refusal(call, code, message)),
                };
                tool_results = grant.tool_results;
                allowed_hosts = grant.allowed_hosts();
                // The values of the call's owner: a served tenant's own; in
                // a replay, none at all.
                let owner = bound.grant_profile().and_then(|p| p.tenant.as_deref());
                if !context.replaying {
                    secrets = match crate::extensions::secret_headers(registry, &grant, owner) {
                        Ok(secrets) => secrets,
                        Err((code, message)) => return Ok(refusal(call, code, message)),
                    };
                }
                component
            }
            Entry::Builtin(lazy) => {
                lazy.get(&self.sandbox, &|_| {})
                    .await
                    .map_err(|source| ExecuteError::Load {
                        tool: call.tool_id.clone(),
                        source: Box::new(source),
                    })?
            }
            Entry::Component { component, .. } => component,
            Entry::Mcp {
                dir, registration, ..
            } => {
                let execution = self.run_mcp(call, dir, *registration).await?;
                return mcp_view(execution, context.views.as_deref());
            }
        };
        let limits = match overrides {
            None => *component.limits(),
            Some(overrides) => {
                let (limits, clamped) = self
                    .sandbox
                    .policy()
                    .resolve(*component.limits(), overrides)
                    .map_err(|source| ExecuteError::Limits {
                        tool: call.tool_id.clone(),
                        source,
                    })?;
                for lowered in clamped {
                    tracing::debug!(
                        tool = %call.tool_id,
                        limit = lowered.limit,
                        requested = lowered.requested,
                        cap = lowered.cap,
                        "profile limit lowered to the host policy cap"
                    );
                }
                limits
            }
        };
        let grant = CallGrant::of(component, tool_results)
            .allowing(&allowed_hosts)
            .with_secrets(&secrets);
        let capabilities = bound.prepare(&grant).map_err(ExecuteError::HostFault)?;
        let report = self
            .sandbox
            .call_under(component, &limits, &call.arguments, entropy, capabilities)
            .await;
        if let Some(fault) = report.host_fault.clone() {
            return Err(ExecuteError::HostFault(fault));
        }
        let (result, effect) = AgentToolResult::from_outcome(call, report.outcome());
        result.check_identity(call)?;
        Ok(Execution {
            result,
            effect,
            report: Some(report),
        })
    }

    /// One MCP call: recheck the registration right before sending, send,
    /// project the answer.
    async fn run_mcp(
        &self,
        call: &ToolCall,
        dir: &std::path::Path,
        registration: Uuid,
    ) -> Result<Execution, ExecuteError> {
        let tool = call.tool_id.native_name();
        let refused = |code: &str, message: String| Ok(refusal(call, code, message));
        // The registration as it is now, not as it was when the run began.
        let current = match registration_now(dir, registration) {
            Ok(current) => current,
            Err(error) => {
                return refused(
                    error.code(),
                    format!("the MCP registrations cannot be read now: {error}"),
                );
            }
        };
        let Some(current) = current else {
            return refused(
                "mcp.server_unavailable",
                "this tool's MCP server is no longer registered".into(),
            );
        };
        if current.state != State::Active {
            return refused(
                "mcp.server_unavailable",
                format!(
                    "the MCP server {} is {:?} now",
                    current.display_name, current.state
                ),
            );
        }
        if current.permission(tool) == Permission::Deny {
            return refused(
                "mcp.tool_denied",
                format!("{tool} of {} is denied now", current.display_name),
            );
        }
        let Some(arguments) = call.arguments.as_object() else {
            return refused(
                "tool.invalid_arguments",
                "the arguments must be a JSON object".into(),
            );
        };
        let size = call.arguments.to_string().len();
        if size > MCP_MAX_ARGUMENT_BYTES {
            return refused(
                "tool.arguments_too_large",
                format!(
                    "the arguments are {size} bytes; at most {MCP_MAX_ARGUMENT_BYTES} may be sent"
                ),
            );
        }
        let outcome =
            toolhost_mcp::call_tool(&current, tool, arguments.clone(), self.mcp_call_timeout).await;
        let outcome = match outcome {
            CallOutcome::Completed(answer) => {
                let projected = toolhost_mcp::project(&answer);
                if projected.is_error {
                    let mut failure = ToolFailure::new("mcp.tool_error", projected.content);
                    failure.structured = projected.structured;
                    ToolOutcome::Error(failure)
                } else {
                    ToolOutcome::Success(ToolSuccess {
                        content: projected.content,
                        structured: projected.structured,
                        resource_refs: Vec::new(),
                        effect: None,
                    })
                }
            }
            CallOutcome::Failed(info) => {
                ToolOutcome::Error(ToolFailure::new(info.code, info.message))
            }
            CallOutcome::Unknown(info) => {
                return Err(ExecuteError::McpOutcomeUnknown {
                    tool: call.tool_id.clone(),
                    message: info.message,
                });
            }
        };
        let (result, _) = AgentToolResult::from_outcome(call, outcome);
        result.check_identity(call)?;
        Ok(Execution {
            result,
            effect: None,
            report: None,
        })
    }
}

impl ToolExecutor for ToolHost {
    fn approval_required_now(&self, tool: &ToolId) -> Option<String> {
        let Some(Entry::Mcp {
            dir, registration, ..
        }) = self.entries.get(tool)
        else {
            return None;
        };
        // A registry that does not read now is refused by the call itself.
        let current = registration_now(dir, *registration).ok()??;
        (current.permission(tool.native_name()) == Permission::Ask).then(|| {
            format!(
                "the MCP registration `{}` asks now (permission Ask)",
                current.display_name
            )
        })
    }

    fn execute(
        &self,
        call: &ToolCall,
        binding: &ToolBinding,
        entropy: CallEntropy,
        context: CallContext,
    ) -> impl std::future::Future<Output = Result<Execution, ExecuteError>> + Send {
        self.dispatch(call, binding.limits.as_ref(), entropy, context)
    }
}

/// An MCP registration as the registry on disk says it is now (rechecked
/// before each call: a pause, a deny or an `ask` takes effect at once).
fn registration_now(
    dir: &std::path::Path,
    registration: Uuid,
) -> Result<Option<toolhost_mcp::Registration>, toolhost_mcp::McpError> {
    let registry = McpRegistry::load(dir)?;
    Ok(registry
        .registrations()
        .iter()
        .find(|r| r.id == registration)
        .cloned())
}

/// An MCP result too long to read inline, in an invocation that keeps
/// views: externalized, the model reading a preview.
fn mcp_view(
    mut execution: Execution,
    views: Option<&ResultViews>,
) -> Result<Execution, ExecuteError> {
    if let Some(views) = views {
        execution.result = views.externalize(execution.result)?;
    }
    Ok(execution)
}

/// A call refused before it ran: a recoverable result the model reads.
fn refusal(call: &ToolCall, code: &str, message: String) -> Execution {
    let (result, _) =
        AgentToolResult::from_outcome(call, ToolOutcome::Error(ToolFailure::new(code, message)));
    Execution {
        result,
        effect: None,
        report: None,
    }
}
