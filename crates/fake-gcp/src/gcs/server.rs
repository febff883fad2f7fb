//! The HTTP side of the fake: parse an XML API request, ask the state,
//! render GCS's answer.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;

use super::state::{Failure, ListQuery, State, StoredObject};
use super::{GcsOp, GcsRequest};

type Shared = Arc<Mutex<State>>;

/// Request bodies are kept in chunks of about this size.
const CHUNK: usize = 1024 * 1024;

pub(crate) fn router(state: Shared) -> Router {
    super::json::routes().fallback(handle).with_state(state)
}

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a request is, once parsed.
struct Parsed {
    op: GcsOp,
    bucket: String,
    name: String,
    query: Vec<(String, String)>,
}

impl Parsed {
    fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

async fn handle(
    AxumState(state): AxumState<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let parsed = match parse(&method, &uri, &headers) {
        Ok(p) => p,
        Err(f) => {
            drain(body).await;
            return error(&f);
        }
    };
    let (fault, latency) = {
        let mut s = lock(&state);
        let fault = s.admit(GcsRequest {
            op: parsed.op,
            bucket: parsed.bucket.clone(),
            name: parsed.name.clone(),
        });
        s.in_flight += 1;
        s.max_in_flight = s.max_in_flight.max(s.in_flight);
        (fault, s.latency)
    };
    let _in_flight = InFlight(state.clone());
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(f) = fault {
        // Read the body first, so the client sees the status, not a reset.
        drain(body).await;
        return error(&f);
    }
    match serve(&state, &parsed, &method, &headers, body).await {
        Ok(r) => r,
        Err(f) => error(&f),
    }
}

/// Counts a request as in flight until its answer is built.
struct InFlight(Shared);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut s = lock(&self.0);
        s.in_flight = s.in_flight.saturating_sub(1);
    }
}

fn parse(method: &Method, uri: &Uri, headers: &HeaderMap) -> Result<Parsed, Failure> {
    let path = uri.path().strip_prefix('/').unwrap_or(uri.path());
    let (bucket_raw, name_raw) = path.split_once('/').unwrap_or((path, ""));
    let bucket = percent_decode(bucket_raw)?;
    let name = percent_decode(name_raw)?;
    let query: Vec<(String, String)> =
        url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    let has = |k: &str| query.iter().any(|(q, _)| q == k);
    if bucket.is_empty() {
        return Err(Failure::new(
            400,
            "InvalidURI",
            "the fake serves /{bucket}[/{object}] only",
        ));
    }
    let op = if name.is_empty() {
        match *method {
            Method::GET => GcsOp::List,
            _ => {
                return Err(Failure::new(
                    405,
                    "MethodNotAllowed",
                    format!("{method} on a bucket is not supported by the fake"),
                ));
            }
        }
    } else {
        match *method {
            Method::GET => GcsOp::Get,
            Method::HEAD => GcsOp::Head,
            Method::PUT if headers.contains_key("x-goog-copy-source") => GcsOp::Copy,
            Method::PUT if has("uploadId") => GcsOp::UploadPart,
            Method::PUT => GcsOp::Put,
            Method::POST if has("uploads") => GcsOp::InitiateMultipart,
            Method::POST if has("uploadId") => GcsOp::CompleteMultipart,
            Method::DELETE if has("uploadId") => GcsOp::AbortMultipart,
            Method::DELETE => GcsOp::Delete,
            _ => {
                return Err(Failure::new(
                    405,
                    "MethodNotAllowed",
                    format!("{method} on an object is not supported by the fake"),
                ));
            }
        }
    };
    let mut parsed = Parsed {
        op,
        bucket,
        name,
        query,
    };
    if op == GcsOp::List {
        parsed.name = parsed.param("prefix").unwrap_or("").to_owned();
    }
    Ok(parsed)
}

async fn serve(
    state: &Shared,
    p: &Parsed,
    method: &Method,
    headers: &HeaderMap,
    body: Body,
) -> Result<Response, Failure> {
    let content_type = || {
        headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream")
            .to_owned()
    };
    let if_generation = header_u64(headers, "x-goog-if-generation-match")?;
    match p.op {
        GcsOp::Put => {
            let chunks = read_body(body).await?;
            let object =
                lock(state).put(&p.bucket, &p.name, chunks, content_type(), if_generation)?;
            Ok(object_written(&object))
        }
        GcsOp::Copy => {
            drain(body).await;
            let source = headers
                .get("x-goog-copy-source")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let source = percent_decode(source.trim_start_matches('/'))?;
            let (from_bucket, from_name) = source.split_once('/').ok_or_else(|| {
                Failure::new(
                    400,
                    "InvalidArgument",
                    format!("x-goog-copy-source '{source}' is not {{bucket}}/{{object}}"),
                )
            })?;
            let object =
                lock(state).copy(from_bucket, from_name, &p.bucket, &p.name, if_generation)?;
            let body = format!(
                "{}<CopyObjectResult><LastModified>{}</LastModified><ETag>{}</ETag></CopyObjectResult>",
                XML_DECL,
                list_time(&object),
                escape(&object.etag())
            );
            Ok(with_object_headers(xml(200, body), &object, false))
        }
        GcsOp::Get | GcsOp::Head => {
            drain(body).await;
            let object = lock(state).get(&p.bucket, &p.name)?;
            Ok(read_object(&object, headers, *method == Method::HEAD)?)
        }
        GcsOp::Delete => {
            drain(body).await;
            lock(state).delete(&p.bucket, &p.name)?;
            Ok(empty(204))
        }
        GcsOp::List => {
            drain(body).await;
            list(state, p)
        }
        GcsOp::InitiateMultipart => {
            drain(body).await;
            let id = lock(state).initiate(&p.bucket, &p.name, content_type())?;
            Ok(xml(
                200,
                format!(
                    "{XML_DECL}<InitiateMultipartUploadResult xmlns=\"{S3_NS}\"><Bucket>{}</Bucket><Key>{}</Key><UploadId>{}</UploadId></InitiateMultipartUploadResult>",
                    escape(&p.bucket),
                    escape(&p.name),
                    escape(&id)
                ),
            ))
        }
        GcsOp::UploadPart => {
            let id = p.param("uploadId").unwrap_or("").to_owned();
            let number: u32 = p
                .param("partNumber")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| {
                    Failure::new(
                        400,
                        "InvalidArgument",
                        "partNumber must be an integer 1..=10000",
                    )
                })?;
            let chunks = read_body(body).await?;
            let etag = lock(state).upload_part(&p.bucket, &p.name, &id, number, chunks)?;
            let mut r = empty(200);
            set(&mut r, header::ETAG, &etag);
            Ok(r)
        }
        GcsOp::CompleteMultipart => {
            let id = p.param("uploadId").unwrap_or("").to_owned();
            let text = read_body(body).await?.concat();
            let text = String::from_utf8_lossy(&text);
            let parts = parse_complete(&text)?;
            let object = lock(state).complete(&p.bucket, &p.name, &id, &parts)?;
            let body = format!(
                "{XML_DECL}<CompleteMultipartUploadResult xmlns=\"{S3_NS}\"><Location>/{}/{}</Location><Bucket>{}</Bucket><Key>{}</Key><ETag>{}</ETag></CompleteMultipartUploadResult>",
                escape(&p.bucket),
                escape(&p.name),
                escape(&p.bucket),
                escape(&p.name),
                escape(&object.etag())
            );
            Ok(with_object_headers(xml(200, body), &object, false))
        }
        GcsOp::AbortMultipart => {
            drain(body).await;
            let id = p.param("uploadId").unwrap_or("").to_owned();
            lock(state).abort(&p.bucket, &p.name, &id)?;
            Ok(empty(204))
        }
    }
}

fn list(state: &Shared, p: &Parsed) -> Result<Response, Failure> {
    let max_keys = match p.param("max-keys") {
        Some(v) => Some(v.parse::<usize>().map_err(|_| {
            Failure::new(
                400,
                "InvalidArgument",
                format!("max-keys '{v}' is not a number"),
            )
        })?),
        None => None,
    };
    let q = ListQuery {
        prefix: p.param("prefix").unwrap_or("").to_owned(),
        delimiter: p.param("delimiter").map(str::to_owned),
        start_after: p.param("start-after").map(str::to_owned),
        token: p.param("continuation-token").map(str::to_owned),
        max_keys,
    };
    let (page, page_size) = {
        let s = lock(state);
        (s.list(&p.bucket, &q)?, s.page_size)
    };
    let mut out = String::with_capacity(256 + page.objects.len() * 200);
    out.push_str(XML_DECL);
    out.push_str(&format!(
        "<ListBucketResult xmlns=\"{S3_NS}\"><Name>{}</Name><Prefix>{}</Prefix><KeyCount>{}</KeyCount><MaxKeys>{}</MaxKeys>",
        escape(&p.bucket),
        escape(&q.prefix),
        page.objects.len() + page.prefixes.len(),
        max_keys.unwrap_or(page_size)
    ));
    if let Some(d) = &q.delimiter {
        out.push_str(&format!("<Delimiter>{}</Delimiter>", escape(d)));
    }
    out.push_str(&format!(
        "<IsTruncated>{}</IsTruncated>",
        page.next_token.is_some()
    ));
    if let Some(t) = &q.token {
        out.push_str(&format!(
            "<ContinuationToken>{}</ContinuationToken>",
            escape(t)
        ));
    }
    if let Some(t) = &page.next_token {
        out.push_str(&format!(
            "<NextContinuationToken>{}</NextContinuationToken>",
            escape(t)
        ));
    }
    for (key, o) in &page.objects {
        out.push_str(&format!(
            "<Contents><Key>{}</Key><Generation>{}</Generation><MetaGeneration>1</MetaGeneration><LastModified>{}</LastModified><ETag>{}</ETag><Size>{}</Size></Contents>",
            escape(key),
            o.generation,
            list_time(o),
            escape(&o.etag()),
            o.size
        ));
    }
    for prefix in &page.prefixes {
        out.push_str(&format!(
            "<CommonPrefixes><Prefix>{}</Prefix></CommonPrefixes>",
            escape(prefix)
        ));
    }
    out.push_str("</ListBucketResult>");
    Ok(xml(200, out))
}

/// A GET or HEAD of an object, honouring a single `Range`.
fn read_object(
    object: &StoredObject,
    headers: &HeaderMap,
    head: bool,
) -> Result<Response, Failure> {
    let size = object.size;
    let range = match headers.get(header::RANGE).and_then(|v| v.to_str().ok()) {
        Some(spec) => Some(parse_range(spec, size)?),
        None => None,
    };
    let (status, range) = match range {
        Some(r) => (206, r),
        None => (200, 0..size),
    };
    let len = range.end - range.start;
    let mut r = if head {
        empty(status)
    } else {
        let chunks = object.slice(range.clone());
        Response::new(Body::from_stream(futures_util::stream::iter(
            chunks.into_iter().map(Ok::<Bytes, Infallible>),
        )))
    };
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    r = with_object_headers(r, object, true);
    set(&mut r, header::CONTENT_LENGTH, &len.to_string());
    set(&mut r, header::ACCEPT_RANGES, "bytes");
    if status == 206 {
        set(
            &mut r,
            header::CONTENT_RANGE,
            &format!(
                "bytes {}-{}/{size}",
                range.start,
                range.end.saturating_sub(1)
            ),
        );
    }
    Ok(r)
}

/// `bytes=a-b`, `bytes=a-`, `bytes=-n` → a non-empty range inside the
/// object, or 416 as GCS answers.
fn parse_range(spec: &str, size: u64) -> Result<std::ops::Range<u64>, Failure> {
    let bad = || {
        Failure::new(
            416,
            "InvalidRange",
            format!(
                "The requested range '{spec}' cannot be satisfied for an object of {size} bytes."
            ),
        )
    };
    let value = spec.trim().strip_prefix("bytes=").ok_or_else(bad)?;
    if value.contains(',') {
        return Err(Failure::new(
            400,
            "InvalidArgument",
            "multiple ranges are not supported",
        ));
    }
    let (a, b) = value.split_once('-').ok_or_else(bad)?;
    let (start, end) = match (a.trim(), b.trim()) {
        ("", n) => {
            let n: u64 = n.parse().map_err(|_| bad())?;
            if n == 0 {
                return Err(bad());
            }
            (size.saturating_sub(n), size)
        }
        (a, "") => (a.parse().map_err(|_| bad())?, size),
        (a, b) => {
            let a: u64 = a.parse().map_err(|_| bad())?;
            let b: u64 = b.parse().map_err(|_| bad())?;
            if b < a {
                return Err(bad());
            }
            (a, (b + 1).min(size))
        }
    };
    if start >= size {
        return Err(bad());
    }
    Ok(start..end)
}

/// `<Part><PartNumber>n</PartNumber><ETag>e</ETag></Part>…` in listed order.
fn parse_complete(text: &str) -> Result<Vec<(u32, String)>, Failure> {
    let malformed = || {
        Failure::new(
            400,
            "MalformedXML",
            "malformed CompleteMultipartUpload body",
        )
    };
    let mut parts = Vec::new();
    for part in text.split("<Part>").skip(1) {
        let part = part.split("</Part>").next().ok_or_else(malformed)?;
        let number = element(part, "PartNumber")
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(malformed)?;
        let etag = element(part, "ETag").ok_or_else(malformed)?;
        parts.push((number, unescape(etag)));
    }
    Ok(parts)
}

fn element<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let start = text.find(&format!("<{name}>"))? + name.len() + 2;
    let end = text[start..].find(&format!("</{name}>"))? + start;
    Some(&text[start..end])
}

async fn read_body(body: Body) -> Result<Vec<Bytes>, Failure> {
    let mut stream = body.into_data_stream();
    let mut chunks = Vec::new();
    let mut current = BytesMut::new();
    while let Some(frame) = stream.next().await {
        let frame = frame.map_err(|e| {
            Failure::new(
                400,
                "IncompleteBody",
                format!("reading the request body failed: {e}"),
            )
        })?;
        if current.is_empty() && frame.len() >= CHUNK {
            chunks.push(frame);
            continue;
        }
        current.extend_from_slice(&frame);
        if current.len() >= CHUNK {
            chunks.push(current.split().freeze());
        }
    }
    if !current.is_empty() {
        chunks.push(current.freeze());
    }
    Ok(chunks)
}

async fn drain(body: Body) {
    let mut stream = body.into_data_stream();
    while let Some(Ok(_)) = stream.next().await {}
}

fn header_u64(headers: &HeaderMap, name: &str) -> Result<Option<u64>, Failure> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .map(Some)
            .ok_or_else(|| {
                Failure::new(400, "InvalidArgument", format!("{name} must be a number"))
            }),
    }
}

const XML_DECL: &str = "<?xml version='1.0' encoding='UTF-8'?>";
const S3_NS: &str = "http://doc.s3.amazonaws.com/2006-03-01";

fn error(f: &Failure) -> Response {
    xml(
        f.status,
        format!(
            "{XML_DECL}<Error><Code>{}</Code><Message>{}</Message></Error>",
            f.code,
            escape(&f.message)
        ),
    )
}

fn xml(status: u16, body: String) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    set(
        &mut r,
        header::CONTENT_TYPE,
        "application/xml; charset=UTF-8",
    );
    r
}

fn empty(status: u16) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    r
}

fn object_written(object: &StoredObject) -> Response {
    with_object_headers(empty(200), object, false)
}

fn with_object_headers(mut r: Response, o: &StoredObject, content: bool) -> Response {
    set(&mut r, header::ETAG, &o.etag());
    set(&mut r, header::LAST_MODIFIED, &http_time(o));
    set(&mut r, "x-goog-generation", &o.generation.to_string());
    set(&mut r, "x-goog-metageneration", "1");
    set(&mut r, "x-goog-stored-content-length", &o.size.to_string());
    if content {
        set(&mut r, header::CONTENT_TYPE, &o.content_type);
    }
    r
}

fn set<K: axum::http::header::IntoHeaderName>(r: &mut Response, name: K, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        r.headers_mut().insert(name, v);
    }
}

fn http_time(o: &StoredObject) -> String {
    o.updated.format("%a, %d %b %Y %H:%M:%S GMT").to_string()
}

fn list_time(o: &StoredObject) -> String {
    o.updated
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// Percent-decoding of a URL path segment (`+` stays `+`).
fn percent_decode(s: &str) -> Result<String, Failure> {
    let bad = || {
        Failure::new(
            400,
            "InvalidURI",
            format!("invalid percent-encoding in '{s}'"),
        )
    };
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_follow_http_semantics() {
        assert_eq!(parse_range("bytes=2-4", 10).unwrap(), 2..5);
        assert_eq!(parse_range("bytes=7-100", 10).unwrap(), 7..10);
        assert_eq!(parse_range("bytes=7-", 10).unwrap(), 7..10);
        assert_eq!(parse_range("bytes=-3", 10).unwrap(), 7..10);
        assert_eq!(parse_range("bytes=10-12", 10).unwrap_err().status, 416);
        assert_eq!(parse_range("bytes=5-2", 10).unwrap_err().status, 416);
        assert_eq!(parse_range("lines=1-2", 10).unwrap_err().status, 416);
    }

    #[test]
    fn complete_bodies_parse_in_order() {
        let body = r#"<CompleteMultipartUpload><Part><ETag>"a"</ETag><PartNumber>1</PartNumber></Part><Part><PartNumber>2</PartNumber><ETag>&quot;b&quot;</ETag></Part></CompleteMultipartUpload>"#;
        assert_eq!(
            parse_complete(body).unwrap(),
            vec![(1, "\"a\"".to_owned()), (2, "\"b\"".to_owned())]
        );
    }

    #[test]
    fn paths_are_percent_decoded() {
        assert_eq!(percent_decode("a%2Fb%20c+d").unwrap(), "a/b c+d");
        assert!(percent_decode("a%2").is_err());
        assert!(percent_decode("%zz").is_err());
    }
}
