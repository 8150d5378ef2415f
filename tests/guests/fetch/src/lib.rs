//! `GET url` through `wasi:http/outgoing-handler` (or a `POST` ending in
//! trailers), described as JSON: status, headers, body and trailers as
//! the guest received them.

use serde_json::{Value, json};
use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, Scheme};
use wasip2::io::streams::StreamError;

pub fn get(url: &str) -> Value {
    send(url, "", "")
}

/// `get`, its request carrying `headers`; with `trailers`, a `POST` whose
/// body ends in them. Both are `name: value` lines, as a test chooses
/// them (the host's range included: egress must strip it).
pub fn send(url: &str, headers: &str, trailers: &str) -> Value {
    match fetch(url, headers, trailers) {
        Ok(v) => v,
        Err(e) => json!({ "error": e }),
    }
}

fn fields(lines: &str) -> Result<Fields, String> {
    let entries: Vec<_> = lines
        .lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().as_bytes().to_vec()))
        .collect();
    Fields::from_list(&entries).map_err(|e| format!("{e:?}"))
}

fn names(fields: &Fields) -> Vec<(String, String)> {
    fields.entries().into_iter().map(|(n, v)| (n, String::from_utf8_lossy(&v).into_owned())).collect()
}

fn fetch(url: &str, headers: &str, trailers: &str) -> Result<Value, String> {
    let (scheme, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (Scheme::Http, rest),
        (_, Some(rest)) => (Scheme::Https, rest),
        _ => return Err("only http:// and https:// urls".into()),
    };
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    let request = OutgoingRequest::new(fields(headers)?);
    request.set_scheme(Some(&scheme)).map_err(|_| "scheme")?;
    request.set_authority(Some(authority)).map_err(|_| "authority")?;
    request.set_path_with_query(Some(path)).map_err(|_| "path")?;
    let body = if trailers.is_empty() {
        None
    } else {
        request.set_method(&Method::Post).map_err(|_| "method")?;
        Some(request.body().map_err(|_| "no body")?)
    };
    let future = outgoing_handler::handle(request, None).map_err(|e| format!("{e:?}"))?;
    if let Some(body) = body {
        {
            let stream = body.write().map_err(|_| "no stream")?;
            stream.blocking_write_and_flush(b"sent").map_err(|e| format!("{e:?}"))?;
        }
        OutgoingBody::finish(body, Some(fields(trailers)?)).map_err(|e| format!("{e:?}"))?;
    }
    let response = loop {
        match future.get() {
            Some(r) => break r.map_err(|_| "taken twice")?.map_err(|e| format!("{e:?}"))?,
            None => future.subscribe().block(),
        }
    };
    let status = response.status();
    let headers = names(&response.headers());
    let body = response.consume().map_err(|_| "no body")?;
    let mut bytes = Vec::new();
    {
        let stream = body.stream().map_err(|_| "no stream")?;
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => bytes.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => return Err(e.to_debug_string()),
            }
        }
    }
    let trailers = IncomingBody::finish(body);
    let trailers = loop {
        match trailers.get() {
            Some(t) => break t.map_err(|_| "taken twice")?.map_err(|e| format!("{e:?}"))?,
            None => trailers.subscribe().block(),
        }
    };
    Ok(json!({
        "status": status,
        "headers": headers,
        "body": String::from_utf8_lossy(&bytes),
        "trailers": trailers.map(|t| names(&t)).unwrap_or_default(),
    }))
}
