//! Every error the API answers is JSON `{code, message}` with the project's
//! dotted codes and the status that says who must act.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error as the client reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ApiError {
    #[serde(skip)]
    pub status: u16,
    /// Seconds, for `429`: sent as `Retry-After`.
    #[serde(skip)]
    pub retry_after: Option<u64>,
    /// Dotted lowercase, e.g. `serve.unauthorized`.
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Self {
            status: status.as_u16(),
            retry_after: None,
            code: code.to_owned(),
            message: message.into(),
        }
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "serve.unauthorized",
            "send `Authorization: Bearer <token>` with a token this server knows",
        )
    }

    /// `429`: a limit is reached; try again after `seconds`.
    pub fn too_many(code: &str, message: impl Into<String>, seconds: u64) -> Self {
        Self {
            retry_after: Some(seconds),
            ..Self::new(StatusCode::TOO_MANY_REQUESTS, code, message)
        }
    }

    pub fn conflict(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    pub fn bad_request(code: &str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// `500`: the server could not do what it should have; logged.
    pub fn internal(what: &str, error: impl std::fmt::Display) -> Self {
        tracing::error!("{what}: {error}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "serve.internal",
            format!("{what} failed (the server log says why)"),
        )
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "serve.not_found",
            format!("no {what}"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, Json(&self)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        response
    }
}
