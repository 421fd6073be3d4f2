//! The four HTTP model kinds against a fake provider on 127.0.0.1: the
//! endpoint, the key header and the body each provider expects, a tool-call
//! round trip from the providers' golden replies (whole and streamed), and
//! the failures a network brings.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::{Canned, golden, provider_fixture, serve};
use toolhost_core::{AgentModelMessage, Classified, ModelCall, ToolId};
use toolhost_model::{AgentModel, HttpModel, HttpModelConfig};
use toolhost_providers::{GeminiSchemaMode, Provider};

const KEY: &str = "sk-test-loopback";

struct Case {
    provider: Provider,
    /// Fixture directory of the providers' golden tests.
    fixtures: &'static str,
    model: &'static str,
    path: &'static str,
    stream_path: &'static str,
    key_header: (&'static str, String),
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            provider: Provider::OpenaiChat,
            fixtures: "openai_chat",
            model: "gpt-4.1",
            path: "/v1/chat/completions",
            stream_path: "/v1/chat/completions",
            key_header: ("authorization", format!("Bearer {KEY}")),
        },
        Case {
            provider: Provider::OpenaiResponses,
            fixtures: "openai_responses",
            model: "gpt-4.1",
            path: "/v1/responses",
            stream_path: "/v1/responses",
            key_header: ("authorization", format!("Bearer {KEY}")),
        },
        Case {
            provider: Provider::Anthropic,
            fixtures: "anthropic",
            model: "claude-sonnet-4-5",
            path: "/v1/messages",
            stream_path: "/v1/messages",
            key_header: ("x-api-key", KEY.to_owned()),
        },
        Case {
            provider: Provider::Gemini {
                schema: GeminiSchemaMode::JsonSchema,
            },
            fixtures: "gemini",
            model: "gemini-2.5-flash",
            path: "/v1/models/gemini-2.5-flash:generateContent",
            stream_path: "/v1/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
            key_header: ("x-goog-api-key", KEY.to_owned()),
        },
    ]
}

fn model(provider: Provider, base_url: &str, stream: bool) -> HttpModel {
    HttpModel::new(HttpModelConfig {
        provider,
        base_url: format!("{base_url}/"),
        api_key: Some(KEY.to_owned()),
        stream,
        timeout: Duration::from_secs(10),
    })
    .expect("client")
}

fn request(model: &str) -> toolhost_core::AgentModelRequest {
    golden::request(
        model,
        vec![AgentModelMessage::user_text(golden::USER)],
        golden::turn(),
    )
}

fn called(reply: &toolhost_model::ModelReply) -> Vec<ToolId> {
    reply
        .response
        .message
        .tool_calls()
        .map(|call| call.tool_id.clone())
        .collect()
}

#[tokio::test]
async fn every_provider_kind_round_trips_a_tool_call_over_http() {
    for case in cases() {
        let fake = serve(vec![Canned::json(provider_fixture(
            case.fixtures,
            "response_two_calls.json",
        ))])
        .await;
        let model = model(case.provider, &fake.base_url, false);
        let reply = model
            .complete(&request(case.model))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.fixtures));
        assert_eq!(
            called(&reply),
            vec![golden::dice(), golden::forecast()],
            "{}",
            case.fixtures
        );
        let calls: Vec<_> = reply.response.message.tool_calls().cloned().collect();
        assert_eq!(calls[0].arguments["formula"], "1d20+5", "{}", case.fixtures);
        // The raw body is kept for the audit trail.
        assert!(reply.raw.is_object(), "{}", case.fixtures);

        let seen = fake.seen.lock().expect("lock").clone();
        assert_eq!(seen.len(), 1);
        let sent = &seen[0];
        assert_eq!(sent.method, "POST");
        assert_eq!(sent.path, case.path, "{}", case.fixtures);
        assert_eq!(
            sent.header(case.key_header.0),
            Some(case.key_header.1.as_str()),
            "{}",
            case.fixtures
        );
        assert!(
            sent.header("content-type")
                .is_some_and(|v| v.starts_with("application/json"))
        );
        if case.provider == Provider::Anthropic {
            assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
        }
        // The body is the adapter's encoding of the request, tools included.
        let expected = case
            .provider
            .encode_request(&request(case.model), false)
            .expect("encode");
        assert_eq!(sent.body, expected, "{}", case.fixtures);
    }
}

#[tokio::test]
async fn streamed_replies_assemble_into_the_same_calls() {
    for case in cases() {
        let fake = serve(vec![Canned::sse(provider_fixture(
            case.fixtures,
            "stream_two_calls.sse",
        ))])
        .await;
        let model = model(case.provider, &fake.base_url, true);
        let reply = model
            .complete(&request(case.model))
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", case.fixtures));
        assert_eq!(
            called(&reply),
            vec![golden::dice(), golden::forecast()],
            "{}",
            case.fixtures
        );
        let events = reply.raw.as_array().expect("events kept");
        assert!(!events.is_empty());
        let seen = fake.seen.lock().expect("lock").clone();
        assert_eq!(seen[0].path, case.stream_path, "{}", case.fixtures);
        if case.provider
            != (Provider::Gemini {
                schema: GeminiSchemaMode::JsonSchema,
            })
        {
            assert_eq!(
                seen[0].body["stream"],
                Value::Bool(true),
                "{}",
                case.fixtures
            );
        }
    }
}

#[tokio::test]
async fn http_failures_are_typed_and_say_whether_to_retry() {
    let fake = serve(vec![
        Canned {
            status: 429,
            content_type: "application/json",
            body: r#"{"error":{"message":"slow down"}}"#.into(),
            location: None,
        },
        Canned {
            status: 401,
            content_type: "application/json",
            body: r#"{"error":{"message":"bad key"}}"#.into(),
            location: None,
        },
        Canned::json("<html>not json</html>".into()),
        Canned::json(
            r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"builtin:dice.roll","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#.into(),
        ),
    ])
    .await;
    let model = model(Provider::OpenaiChat, &fake.base_url, false);
    let request = request("gpt-4.1");

    let limited = model.complete(&request).await.expect_err("429");
    assert_eq!(limited.code(), "model.rate_limited");
    assert!(limited.retryable());
    assert!(limited.to_string().contains("slow down"), "{limited}");

    let unauthorized = model.complete(&request).await.expect_err("401");
    assert_eq!(unauthorized.code(), "model.unauthorized");
    assert!(!unauthorized.retryable());

    let garbage = model.complete(&request).await.expect_err("not json");
    assert_eq!(garbage.code(), "model.invalid_response");

    // A canonical name is not an alias of this request: never resolved,
    // kept typed for the run loop to answer.
    let unknown = model.complete(&request).await.expect("a reply");
    let mut calls = unknown.response.message.calls();
    match calls.next() {
        Some(ModelCall::Unknown(call)) => {
            assert_eq!(call.name, "builtin:dice.roll");
            assert_eq!(call.error().code(), "model.unknown_tool_call");
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(calls.next().is_none());
    assert_eq!(unknown.response.message.tool_calls().count(), 0);
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_transport_failure() {
    // Bind and drop: the port is (almost certainly) closed now.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let model = model(
        Provider::Anthropic,
        &format!("http://127.0.0.1:{port}/v1"),
        false,
    );
    let error = model
        .complete(&request("claude-sonnet-4-5"))
        .await
        .expect_err("refused");
    assert_eq!(error.code(), "model.transport_failed");
    assert!(error.retryable());
}

/// A provider that redirects elsewhere never gets the key sent there: the
/// review saw `x-api-key` and `x-goog-api-key` follow a 307 to another host.
#[tokio::test]
async fn a_redirect_to_another_origin_sends_the_key_nowhere() {
    for case in cases() {
        let elsewhere = serve(vec![Canned::json("{}".into())]).await;
        let named = serve(vec![Canned::redirect(format!(
            "{}/stolen",
            elsewhere.base_url
        ))])
        .await;
        let model = model(case.provider, &named.base_url, false);
        let error = model
            .complete(&request("m"))
            .await
            .expect_err("a cross-origin redirect");
        let name = case.fixtures;
        assert_eq!(error.code(), "model.transport_failed", "{name}");
        assert!(
            error.to_string().contains("refusing to follow a redirect"),
            "{name}: {error}"
        );
        assert_eq!(named.seen.lock().unwrap().len(), 1, "{name}");
        assert!(
            elsewhere.seen.lock().unwrap().is_empty(),
            "{name}: the other origin was sent a request"
        );
    }
}

#[test]
fn a_model_url_with_a_user_name_is_refused() {
    let error = HttpModel::new(HttpModelConfig {
        provider: Provider::OpenaiChat,
        base_url: "http://127.0.0.1:1@example.com/v1".into(),
        api_key: Some(KEY.to_owned()),
        stream: false,
        timeout: Duration::from_secs(1),
    })
    .expect_err("userinfo");
    assert_eq!(error.code(), "model.configuration_invalid");
    assert!(
        error.to_string().contains("user name or password"),
        "{error}"
    );
}
