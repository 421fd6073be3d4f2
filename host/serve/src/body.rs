//! [`Body`]: a JSON request body whose every refusal is the API's
//! `{code, message}`: a wrong `Content-Type` is `415`, a body over
//! [`crate::MAX_BODY_BYTES`] (a start request: [`crate::MAX_RUN_BODY_BYTES`]) `413`, bad JSON and unknown or missing fields
//! `400`.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

pub struct Body<T>(pub T);

impl<S, T> FromRequest<S> for Body<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(request, state).await {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(refusal(&rejection)),
        }
    }
}

fn refusal(rejection: &JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "serve.unsupported_media_type",
            "send the body as `Content-Type: application/json`",
        ),
        JsonRejection::JsonSyntaxError(error) => ApiError::new(
            StatusCode::BAD_REQUEST,
            "serve.invalid_json",
            format!("the body is not JSON: {}", error.body_text()),
        ),
        JsonRejection::JsonDataError(error) => ApiError::new(
            StatusCode::BAD_REQUEST,
            "serve.invalid_request",
            error.body_text(),
        ),
        other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "serve.body_too_large",
            format!(
                "a request body is at most {} bytes ({} for POST /v1/runs)",
                crate::MAX_BODY_BYTES,
                crate::MAX_RUN_BODY_BYTES
            ),
        ),
        other => ApiError::new(
            StatusCode::BAD_REQUEST,
            "serve.invalid_request",
            other.body_text(),
        ),
    }
}
