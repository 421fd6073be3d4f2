"""`web.fetch_text`: a toolhost extension tool that calls the web, in Python.

Built into a WebAssembly component by componentize-py (see build.sh); the
bindings (`wit_world`) are generated at build time from wit/world.wit, which
adds the standard `wasi:http/outgoing-handler` to toolhost's minimal world.
The host admits each request against the hosts the user granted this
extension; this code never decides who may be called.

Exceptions other than `Err(ToolError)` trap the component (it is built with
--stub-wasi, so printing a traceback is impossible): the host reports them as
`sandbox.guest_trap` and keeps serving. The stubs are CPython's own WASI
imports only: the wasi:http ones stay real (build.sh says how).
"""
import ipaddress
import json
import urllib.parse

# componentize-py snapshots the interpreter after importing this module, and
# with --stub-wasi nothing can be loaded from a file later: the IDNA codec
# (non-ASCII host names) loads part of itself on first use, which would trap
# inside a call. Using it once here puts all of it in the snapshot.
"b\u00fccher.example".encode("idna")

from wit_world import exports
# Two interfaces are called `types` (toolhost:tool's and wasi:http's):
# build.sh names their modules `types` and `http_types`.
from wit_world.imports import http_types as http, log, outgoing_handler, streams, types
from componentize_py_types import Err

# What the model is shown at most: enough for an API answer or an article,
# small enough not to flood the context.
MAX_CHARS = 20_000
# A UTF-8 character is at most 4 bytes, so this many bytes always decode to
# more than MAX_CHARS characters: reading stops there instead of pulling up
# to the host's 8 MiB cap through the sandbox for nothing.
MAX_BYTES = 4 * MAX_CHARS + 1
READ_CHUNK = 64 * 1024
MAX_URL_CHARS = 8_000
# Some APIs (api.github.com) refuse requests that carry no User-Agent.
USER_AGENT = b"toolhost-fetch-py/0.1.0"

INPUT_SCHEMA = json.dumps({
    "type": "object",
    "properties": {
        "url": {
            "type": "string",
            "description": "The http:// or https:// URL to GET.",
        }
    },
    "required": ["url"],
    "additionalProperties": False,
})

OUTPUT_SCHEMA = json.dumps({
    "type": "object",
    "properties": {
        "status": {"type": "integer"},
        "contentType": {"type": ["string", "null"]},
        "location": {
            "type": ["string", "null"],
            "description": "The Location header, resolved against the URL; never followed.",
        },
        "text": {"type": "string"},
        "truncated": {"type": "boolean"},
    },
    "required": ["status", "contentType", "location", "text", "truncated"],
})

# error-code's cases as WIT spells them. componentize-py's class names
# (`ErrorCode_HttpRequestDenied`) lose the spelling the WASI documentation and
# the host's log use (`HTTP-request-denied`), so messages take it from here.
_ERROR_CODE_NAMES = {
    name.replace("-", "").lower(): name
    for name in [
        "DNS-timeout", "DNS-error", "destination-not-found",
        "destination-unavailable", "destination-IP-prohibited",
        "destination-IP-unroutable", "connection-refused",
        "connection-terminated", "connection-timeout",
        "connection-read-timeout", "connection-write-timeout",
        "connection-limit-reached", "TLS-protocol-error",
        "TLS-certificate-error", "TLS-alert-received", "HTTP-request-denied",
        "HTTP-request-length-required", "HTTP-request-body-size",
        "HTTP-request-method-invalid", "HTTP-request-URI-invalid",
        "HTTP-request-URI-too-long", "HTTP-request-header-section-size",
        "HTTP-request-header-size", "HTTP-request-trailer-section-size",
        "HTTP-request-trailer-size", "HTTP-response-incomplete",
        "HTTP-response-header-section-size", "HTTP-response-header-size",
        "HTTP-response-body-size", "HTTP-response-trailer-section-size",
        "HTTP-response-trailer-size", "HTTP-response-transfer-coding",
        "HTTP-response-content-coding", "HTTP-response-timeout",
        "HTTP-upgrade-failed", "HTTP-protocol-error", "loop-detected",
        "configuration-error", "internal-error",
    ]
}

# The two refusals of the host's policy, explained: the model cannot fix
# either by retrying, only by asking the user or choosing another URL.
_ERROR_CODE_HINTS = {
    "HTTP-request-denied":
        "the host refused the request (its host is not granted to this extension)",
    "destination-IP-prohibited":
        "the host refused the address the name resolved to (not a public "
        "address, and not granted as a literal)",
}


def _error(code: str, message: str, structured=None) -> Err:
    return Err(types.ToolError(
        code=code,
        message=message,
        structured=None if structured is None else json.dumps(structured),
    ))


def _invalid_url(url: str, why: str) -> Err:
    return _error("fetch.invalid_url", f"The URL is not usable: {why}.", {"url": url})


def _error_code_name(code) -> str:
    case = type(code).__name__.split("_", 1)[-1]
    return _ERROR_CODE_NAMES.get(case.lower(), case)


def _describe_payload(value) -> str:
    # Records (DNS-error-payload, field-size-payload, ...) are dataclasses;
    # print their set fields the way WIT names them.
    fields = getattr(value, "__dataclass_fields__", None)
    if fields is None:
        return str(value)
    return ", ".join(
        f"{name.replace('_', '-')} {getattr(value, name)}"
        for name in fields
        if getattr(value, name) is not None
    )


def _describe_error_code(code) -> str:
    name = _error_code_name(code)
    if name in _ERROR_CODE_HINTS:
        return f"{name}: {_ERROR_CODE_HINTS[name]}"
    payload = getattr(code, "value", None)
    if payload is None:
        return name
    return f"{name}: {_describe_payload(payload)}"


def _http_error(url: str, code) -> Err:
    described = _describe_error_code(code)
    return _error(
        "fetch.http_error",
        f"GET {url} failed: {described}.",
        {"url": url, "errorCode": _error_code_name(code), "detail": described},
    )


def _split_url(url: str):
    """(scheme, authority, path-with-query) of `url`, or raises fetch.invalid_url."""
    if len(url) > MAX_URL_CHARS:
        raise _invalid_url(url[:200] + "...", f"it is longer than {MAX_URL_CHARS} characters")
    # urlsplit silently drops tabs and newlines; a URL with any is a mistake.
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise _invalid_url(url, "it contains whitespace or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as e:  # e.g. a bracketed host that is no IPv6 address
        raise _invalid_url(url, str(e))
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise _invalid_url(url, "only http:// and https:// URLs can be fetched")
    if parts.username is not None or parts.password is not None:
        raise _invalid_url(url, "credentials in the URL are not supported")
    host = parts.hostname
    if not host:
        raise _invalid_url(url, "it names no host")
    try:
        port = parts.port
    except ValueError:
        raise _invalid_url(url, "its port is not a number from 0 to 65535")
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise _invalid_url(url, "its IPv6 address is not valid")
        host = f"[{host}]"
    elif not host.isascii():
        # The host's allow-list and DNS speak ASCII (punycode).
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            raise _invalid_url(url, "its host name is not a valid internationalized name")
    authority = host if port is None else f"{host}:{port}"
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    # Percent-encode what HTTP forbids in a request target (spaces were
    # refused above; non-ASCII, quotes, braces...) and keep existing escapes.
    path = urllib.parse.quote(path, safe="/?&=%:@!$'()*+,;~[]")
    return scheme, authority, path


def _header(fields, name: str):
    values = fields.get(name)
    return values[0].decode("utf-8", "replace") if values else None


def _read_body(url: str, response):
    """(bytes read, whether the body ended) of at most MAX_BYTES bytes."""
    received = bytearray()
    # consume() and stream() each give a child resource: the stream must go
    # before the body, and the body before the response (the `with` order).
    with response.consume() as body, body.stream() as stream:
        while len(received) < MAX_BYTES:
            try:
                received += stream.blocking_read(READ_CHUNK)
            except Err as e:
                if isinstance(e.value, streams.StreamError_Closed):
                    return bytes(received), True
                with e.value.value as io_error:
                    code = http.http_error_code(io_error)
                    detail = io_error.to_debug_string()
                if code is not None:
                    raise _http_error(url, code)
                # wasmtime-wasi-http reports some of a body's failures (the
                # host's size cap, a read timeout) as text only; its first
                # line says what happened, the rest can be a host backtrace.
                detail = detail.strip().split("\n", 1)[0]
                raise _error(
                    "fetch.http_error",
                    f"GET {url}: the response body broke off: {detail}.",
                    {"url": url, "errorCode": None, "detail": detail},
                )
    return bytes(received), False


def _get(url: str, scheme: str, authority: str, path: str):
    request = http.OutgoingRequest(http.Fields.from_list([("user-agent", USER_AGENT)]))
    try:
        request.set_method(http.Method_Get())
        request.set_scheme(http.Scheme_Https() if scheme == "https" else http.Scheme_Http())
        request.set_authority(authority)
        request.set_path_with_query(path)
    except Err:
        raise _invalid_url(url, "wasi:http does not accept its host, port or path")
    # A GET sends no body, but the body must still be finished, or the
    # request never completes.
    try:
        body = request.body()
    except Err:
        raise _error("fetch.http_error", f"GET {url}: the request body is unavailable.")
    try:
        http.OutgoingBody.finish(body, None)
        future = outgoing_handler.handle(request, None)
    except Err as e:
        raise _http_error(url, e.value)
    with future:
        while True:
            ready = future.get()
            if ready is not None:
                break
            # The pollable is a child of the future: dropped before it.
            with future.subscribe() as pollable:
                pollable.block()
        if isinstance(ready, Err):
            raise _error("fetch.http_error", f"GET {url}: the response was already taken.")
        if isinstance(ready.value, Err):
            raise _http_error(url, ready.value.value)
        with ready.value.value as response:
            status = response.status()
            with response.headers() as fields:
                content_type = _header(fields, "content-type")
                location = _header(fields, "location")
            data, ended = _read_body(url, response)
    return status, content_type, location, data, ended


def _content(url: str, result) -> str:
    # The model sees only this text, never `structured`: everything it needs
    # to decide what to do next is repeated here.
    head = f"GET {url} → HTTP {result['status']}"
    if result["contentType"]:
        head += f" ({result['contentType']})"
    lines = [head]
    if result["location"] and 300 <= result["status"] < 400:
        lines.append(
            f"Location: {result['location']} (not followed: call this tool "
            "again with it to follow the redirect)"
        )
    elif result["location"]:
        lines.append(f"Location: {result['location']}")
    if result["truncated"]:
        lines.append(f"The body is longer than {MAX_CHARS:,} characters: only the first are shown.")
    if not result["text"]:
        lines.append("The body is empty.")
        return "\n".join(lines)
    return "\n".join(lines) + "\n\n" + result["text"]


class Tool(exports.Tool):
    def describe(self) -> types.Descriptor:
        return types.Descriptor(
            native_name="web.fetch_text",
            title="Fetch text",
            description=(
                "GET an http(s) URL and return the status, content type and "
                f"body as text (at most {MAX_CHARS:,} characters). Redirects "
                "are not followed: a 3xx returns its Location, to fetch "
                "next if wanted. Only hosts the user granted can be reached."
            ),
            input_schema=INPUT_SCHEMA,
            output_schema=OUTPUT_SCHEMA,
            annotations=types.Annotations(
                read_only=True,
                mutating=False,
                control=False,
                # The same URL may answer differently from one call to the next.
                idempotent=False,
                open_world=True,
                source_kind="web",
            ),
        )

    def call(self, arguments: str) -> types.ToolOutput:
        try:
            args = json.loads(arguments)
        except ValueError as e:
            raise _error("tool.invalid_arguments", f"Arguments are not valid JSON: {e}.")
        if not isinstance(args, dict) or not isinstance(args.get("url"), str):
            raise _error("tool.invalid_arguments",
                         'Pass an object with a string field "url".')
        url = args["url"]
        scheme, authority, path = _split_url(url)
        log.log(log.Level.INFO, f"GET {url}")
        # One request; a redirect is returned, not followed. Every hop must
        # pass the host's allow-list, and a Location handed back to the model
        # is checked like any URL when the model calls again with it.
        status, content_type, location, data, ended = _get(url, scheme, authority, path)
        text = data.decode("utf-8", "replace")
        truncated = not ended or len(text) > MAX_CHARS
        result = {
            "status": status,
            "contentType": content_type,
            "location": None if location is None else urllib.parse.urljoin(url, location),
            "text": text[:MAX_CHARS],
            "truncated": truncated,
        }
        return types.ToolOutput(
            content=_content(url, result),
            structured=json.dumps(result),
            resource_refs=[url],
            effect=None,
        )
