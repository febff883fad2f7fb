//! The fake's state: buckets of objects, multipart uploads in progress,
//! scripted faults and the request log. Plain synchronous code; the HTTP
//! layer (`server.rs`) only parses requests and renders answers.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;

use bytes::Bytes;
use chrono::{DateTime, Utc};

use super::{GcsFault, GcsOp, GcsRequest};
use crate::google::Policy;

/// What the JSON API keeps of a bucket besides its objects.
#[derive(Debug, Clone)]
pub(crate) struct BucketMeta {
    pub(crate) project: Option<String>,
    pub(crate) location: String,
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) lifecycle: Option<serde_json::Value>,
    pub(crate) uniform: bool,
    pub(crate) created: String,
    pub(crate) metageneration: u64,
    pub(crate) policy: Policy,
}

impl BucketMeta {
    pub(crate) fn new(project: Option<&str>, location: &str) -> Self {
        Self {
            project: project.map(str::to_owned),
            location: location.to_uppercase(),
            labels: BTreeMap::new(),
            lifecycle: None,
            uniform: false,
            created: Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            metageneration: 1,
            policy: Policy::default(),
        }
    }
}

/// GCS's smallest multipart part (every part but the last): 5 MiB.
pub(crate) const MIN_PART_SIZE: u64 = 5 * 1024 * 1024;

/// An error answer: HTTP status, XML API error code, message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) status: u16,
    pub(crate) code: &'static str,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: u16, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// The error GCS gives for `status` when a fault asks for it.
    pub(crate) fn injected(status: u16) -> Self {
        let code = match status {
            400 => "InvalidArgument",
            401 => "AuthenticationRequired",
            403 => "AccessDenied",
            404 => "NoSuchKey",
            409 => "Conflict",
            412 => "PreconditionFailed",
            429 => "SlowDown",
            500 => "InternalError",
            502 => "BadGateway",
            503 => "ServiceUnavailable",
            504 => "GatewayTimeout",
            _ => "InjectedFault",
        };
        Self::new(status, code, format!("injected fault (HTTP {status})"))
    }

    fn no_bucket(bucket: &str) -> Self {
        Self::new(
            404,
            "NoSuchBucket",
            format!("The specified bucket does not exist: {bucket}"),
        )
    }

    fn no_key(bucket: &str, name: &str) -> Self {
        Self::new(
            404,
            "NoSuchKey",
            format!("The specified key does not exist: {bucket}/{name}"),
        )
    }
}

/// One stored object. Its bytes are kept as the chunks they arrived in, so
/// a large object is never copied into one allocation.
#[derive(Debug, Clone)]
pub(crate) struct StoredObject {
    pub(crate) chunks: Vec<Bytes>,
    pub(crate) size: u64,
    pub(crate) generation: u64,
    pub(crate) content_type: String,
    pub(crate) updated: DateTime<Utc>,
}

impl StoredObject {
    pub(crate) fn etag(&self) -> String {
        format!("\"{:016x}\"", self.generation)
    }

    /// The chunks covering `range` (clamped to the object).
    pub(crate) fn slice(&self, range: Range<u64>) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut offset = 0u64;
        for chunk in &self.chunks {
            let len = chunk.len() as u64;
            let (start, end) = (offset, offset + len);
            offset = end;
            if end <= range.start || start >= range.end {
                continue;
            }
            let from = range.start.saturating_sub(start) as usize;
            let to = (range.end.min(end) - start) as usize;
            out.push(chunk.slice(from..to));
        }
        out
    }

    pub(crate) fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.size as usize);
        for c in &self.chunks {
            out.extend_from_slice(c);
        }
        out
    }
}

#[derive(Debug)]
struct Upload {
    bucket: String,
    name: String,
    content_type: String,
    parts: BTreeMap<u32, (String, Vec<Bytes>, u64)>,
}

#[derive(Debug)]
struct ArmedFault {
    fault: GcsFault,
    skipped: usize,
    fired: usize,
}

/// Everything the fake holds.
#[derive(Debug, Default)]
pub(crate) struct State {
    buckets: BTreeMap<String, BTreeMap<String, StoredObject>>,
    uploads: HashMap<String, Upload>,
    faults: Vec<ArmedFault>,
    requests: Vec<GcsRequest>,
    next_generation: u64,
    next_upload: u64,
    pub(crate) page_size: usize,
    pub(crate) latency: std::time::Duration,
    /// Smallest part accepted in a multipart upload, but for the last one.
    pub(crate) min_part_size: u64,
    /// Requests being answered now, and the most there ever were at once.
    pub(crate) in_flight: usize,
    pub(crate) max_in_flight: usize,
    /// JSON API: what each bucket is besides its objects.
    meta: BTreeMap<String, BucketMeta>,
    /// JSON API: permissions the caller lacks.
    pub(crate) json_denied: BTreeSet<String>,
    /// JSON API: who the caller is, in permission errors.
    pub(crate) caller: String,
    /// JSON API: every call, as `"{verb} {bucket}"`.
    pub(crate) json_calls: Vec<String>,
    /// JSON API: every bucket created by `insert`, in order.
    pub(crate) bucket_inserts: Vec<String>,
}

/// A page of a listing.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ListPage {
    pub(crate) objects: Vec<(String, StoredObject)>,
    pub(crate) prefixes: Vec<String>,
    pub(crate) next_token: Option<String>,
}

/// What a list request asks for.
#[derive(Debug, Default)]
pub(crate) struct ListQuery {
    pub(crate) prefix: String,
    pub(crate) delimiter: Option<String>,
    pub(crate) start_after: Option<String>,
    pub(crate) token: Option<String>,
    pub(crate) max_keys: Option<usize>,
}

impl PartialEq for StoredObject {
    fn eq(&self, other: &Self) -> bool {
        self.generation == other.generation
    }
}
impl Eq for StoredObject {}

impl State {
    pub(crate) fn new() -> Self {
        Self {
            page_size: 1000,
            min_part_size: MIN_PART_SIZE,
            next_generation: 1_700_000_000_000_000,
            caller: "user@example.com".to_owned(),
            ..Self::default()
        }
    }

    // ---- test-side API

    pub(crate) fn create_bucket(&mut self, bucket: &str) {
        self.buckets.entry(bucket.to_owned()).or_default();
        self.meta
            .entry(bucket.to_owned())
            .or_insert_with(|| BucketMeta::new(None, "US"));
    }

    pub(crate) fn bucket_meta(&self, bucket: &str) -> Option<&BucketMeta> {
        self.meta.get(bucket)
    }

    pub(crate) fn bucket_meta_mut(&mut self, bucket: &str) -> Option<&mut BucketMeta> {
        self.meta.get_mut(bucket)
    }

    /// Create (or replace the metadata of) a bucket.
    pub(crate) fn insert_bucket(&mut self, bucket: &str, meta: BucketMeta) {
        self.buckets.entry(bucket.to_owned()).or_default();
        self.meta.insert(bucket.to_owned(), meta);
    }

    /// Remove a bucket with whatever it holds.
    pub(crate) fn remove_bucket(&mut self, bucket: &str) {
        self.buckets.remove(bucket);
        self.meta.remove(bucket);
    }

    pub(crate) fn bucket_names(&self) -> Vec<String> {
        self.buckets.keys().cloned().collect()
    }

    pub(crate) fn inject(&mut self, fault: GcsFault) {
        self.faults.push(ArmedFault {
            fault,
            skipped: 0,
            fired: 0,
        });
    }

    pub(crate) fn clear_faults(&mut self) {
        self.faults.clear();
    }

    pub(crate) fn requests(&self) -> Vec<GcsRequest> {
        self.requests.clone()
    }

    pub(crate) fn count(&self, op: GcsOp) -> usize {
        self.requests.iter().filter(|r| r.op == op).count()
    }

    pub(crate) fn clear_requests(&mut self) {
        self.requests.clear();
    }

    pub(crate) fn object(&self, bucket: &str, name: &str) -> Option<&StoredObject> {
        self.buckets.get(bucket)?.get(name)
    }

    pub(crate) fn objects(&self, bucket: &str) -> Vec<(String, u64)> {
        self.buckets
            .get(bucket)
            .map(|b| b.iter().map(|(k, o)| (k.clone(), o.size)).collect())
            .unwrap_or_default()
    }

    pub(crate) fn pending_uploads(&self) -> usize {
        self.uploads.len()
    }

    // ---- request path

    /// Log the request and return the fault due for it, if any.
    pub(crate) fn admit(&mut self, request: GcsRequest) -> Option<Failure> {
        let mut due = None;
        for armed in &mut self.faults {
            if armed.fired >= armed.fault.times || !armed.fault.matches(&request) {
                continue;
            }
            if armed.skipped < armed.fault.skip {
                armed.skipped += 1;
                continue;
            }
            armed.fired += 1;
            due = Some(Failure::injected(armed.fault.status));
            break;
        }
        self.faults.retain(|a| a.fired < a.fault.times);
        self.requests.push(request);
        due
    }

    fn bucket(&self, bucket: &str) -> Result<&BTreeMap<String, StoredObject>, Failure> {
        self.buckets
            .get(bucket)
            .ok_or_else(|| Failure::no_bucket(bucket))
    }

    fn bucket_mut(&mut self, bucket: &str) -> Result<&mut BTreeMap<String, StoredObject>, Failure> {
        self.buckets
            .get_mut(bucket)
            .ok_or_else(|| Failure::no_bucket(bucket))
    }

    fn generation(&mut self) -> u64 {
        self.next_generation += 1;
        self.next_generation
    }

    pub(crate) fn get(&self, bucket: &str, name: &str) -> Result<StoredObject, Failure> {
        self.bucket(bucket)?
            .get(name)
            .cloned()
            .ok_or_else(|| Failure::no_key(bucket, name))
    }

    /// `x-goog-if-generation-match`: `0` means "only if absent".
    fn check_generation(
        &self,
        bucket: &str,
        name: &str,
        if_generation: Option<u64>,
    ) -> Result<(), Failure> {
        let Some(wanted) = if_generation else {
            return Ok(());
        };
        let current = self.bucket(bucket)?.get(name).map_or(0, |o| o.generation);
        if current == wanted {
            Ok(())
        } else {
            Err(Failure::new(
                412,
                "PreconditionFailed",
                format!(
                    "At least one of the pre-conditions you specified did not hold (x-goog-if-generation-match: {wanted}, current generation of {bucket}/{name}: {current})"
                ),
            ))
        }
    }

    pub(crate) fn put(
        &mut self,
        bucket: &str,
        name: &str,
        chunks: Vec<Bytes>,
        content_type: String,
        if_generation: Option<u64>,
    ) -> Result<StoredObject, Failure> {
        self.check_generation(bucket, name, if_generation)?;
        let size = chunks.iter().map(|c| c.len() as u64).sum();
        let object = StoredObject {
            chunks,
            size,
            generation: self.generation(),
            content_type,
            updated: Utc::now(),
        };
        self.bucket_mut(bucket)?
            .insert(name.to_owned(), object.clone());
        Ok(object)
    }

    pub(crate) fn copy(
        &mut self,
        source_bucket: &str,
        source: &str,
        bucket: &str,
        name: &str,
        if_generation: Option<u64>,
    ) -> Result<StoredObject, Failure> {
        let from = self.get(source_bucket, source)?;
        self.put(bucket, name, from.chunks, from.content_type, if_generation)
    }

    pub(crate) fn delete(&mut self, bucket: &str, name: &str) -> Result<(), Failure> {
        self.bucket_mut(bucket)?
            .remove(name)
            .map(|_| ())
            .ok_or_else(|| Failure::no_key(bucket, name))
    }

    pub(crate) fn initiate(
        &mut self,
        bucket: &str,
        name: &str,
        content_type: String,
    ) -> Result<String, Failure> {
        self.bucket(bucket)?;
        self.next_upload += 1;
        let id = format!("fake-upload-{}", self.next_upload);
        self.uploads.insert(
            id.clone(),
            Upload {
                bucket: bucket.to_owned(),
                name: name.to_owned(),
                content_type,
                parts: BTreeMap::new(),
            },
        );
        Ok(id)
    }

    fn upload_mut(&mut self, bucket: &str, name: &str, id: &str) -> Result<&mut Upload, Failure> {
        match self.uploads.get_mut(id) {
            Some(u) if u.bucket == bucket && u.name == name => Ok(u),
            _ => Err(Failure::new(
                404,
                "NoSuchUpload",
                format!("The requested upload {id} of {bucket}/{name} was not found."),
            )),
        }
    }

    pub(crate) fn upload_part(
        &mut self,
        bucket: &str,
        name: &str,
        id: &str,
        part: u32,
        chunks: Vec<Bytes>,
    ) -> Result<String, Failure> {
        if !(1..=10_000).contains(&part) {
            return Err(Failure::new(
                400,
                "InvalidArgument",
                format!("partNumber {part} is outside 1..=10000"),
            ));
        }
        let size: u64 = chunks.iter().map(|c| c.len() as u64).sum();
        let upload = self.upload_mut(bucket, name, id)?;
        let etag = format!("\"part-{part}-{size}-{}\"", upload.parts.len());
        upload.parts.insert(part, (etag.clone(), chunks, size));
        Ok(etag)
    }

    pub(crate) fn complete(
        &mut self,
        bucket: &str,
        name: &str,
        id: &str,
        listed: &[(u32, String)],
    ) -> Result<StoredObject, Failure> {
        let min_part = self.min_part_size;
        let upload = self.upload_mut(bucket, name, id)?;
        if listed.is_empty() {
            return Err(Failure::new(
                400,
                "MalformedXML",
                "a multipart upload needs at least one part",
            ));
        }
        let mut chunks = Vec::new();
        let mut previous = 0;
        for (i, (number, etag)) in listed.iter().enumerate() {
            if *number <= previous {
                return Err(Failure::new(
                    400,
                    "InvalidPartOrder",
                    "parts must be listed in ascending order",
                ));
            }
            previous = *number;
            match upload.parts.get(number) {
                Some((stored, data, size))
                    if stored.trim_matches('"') == etag.trim_matches('"') =>
                {
                    if *size < min_part && i + 1 < listed.len() {
                        return Err(Failure::new(
                            400,
                            "EntityTooSmall",
                            format!(
                                "part {number} is {size} bytes; every part but the last must be at least {min_part} bytes"
                            ),
                        ));
                    }
                    chunks.extend(data.iter().cloned());
                }
                _ => {
                    return Err(Failure::new(
                        400,
                        "InvalidPart",
                        format!("part {number} with ETag {etag} was not uploaded"),
                    ));
                }
            }
        }
        let content_type = upload.content_type.clone();
        self.uploads.remove(id);
        self.put(bucket, name, chunks, content_type, None)
    }

    pub(crate) fn abort(&mut self, bucket: &str, name: &str, id: &str) -> Result<(), Failure> {
        self.upload_mut(bucket, name, id)?;
        self.uploads.remove(id);
        Ok(())
    }

    /// One page of a `list-type=2` listing: keys and common prefixes merged
    /// in key order; the continuation token is the last item of the page.
    pub(crate) fn list(&self, bucket: &str, q: &ListQuery) -> Result<ListPage, Failure> {
        let objects = self.bucket(bucket)?;
        let limit = q
            .max_keys
            .unwrap_or(self.page_size)
            .min(self.page_size)
            .max(1);
        let resume = match (&q.token, &q.start_after) {
            (Some(t), _) => Some(decode_token(t).ok_or_else(|| {
                Failure::new(400, "InvalidArgument", "invalid continuation-token")
            })?),
            (None, Some(s)) => Some(s.clone()),
            (None, None) => None,
        };
        let mut page = ListPage::default();
        let mut count = 0;
        let mut last: Option<String> = None;
        let start = resume.clone().unwrap_or_else(|| q.prefix.clone());
        for (key, object) in objects.range(start..) {
            if !key.starts_with(&q.prefix) {
                if key.as_str() > q.prefix.as_str() {
                    break;
                }
                continue;
            }
            if let Some(r) = &resume {
                if key <= r {
                    continue;
                }
                // A token that names a common prefix covers every key under it.
                if q.delimiter
                    .as_ref()
                    .is_some_and(|d| r.ends_with(d.as_str()))
                    && key.starts_with(r.as_str())
                {
                    continue;
                }
            }
            let rest = &key[q.prefix.len()..];
            let item = match q.delimiter.as_deref().filter(|d| !d.is_empty()) {
                Some(d) => match rest.find(d) {
                    Some(i) => Item::Prefix(format!("{}{}", q.prefix, &rest[..i + d.len()])),
                    None => Item::Key,
                },
                None => Item::Key,
            };
            if let Item::Prefix(p) = &item
                && page.prefixes.last() == Some(p)
            {
                continue;
            }
            if count == limit {
                page.next_token = last.as_deref().map(encode_token);
                break;
            }
            count += 1;
            match item {
                Item::Key => {
                    last = Some(key.clone());
                    page.objects.push((key.clone(), object.clone()));
                }
                Item::Prefix(p) => {
                    last = Some(p.clone());
                    page.prefixes.push(p);
                }
            }
        }
        Ok(page)
    }
}

enum Item {
    Key,
    Prefix(String),
}

fn encode_token(last: &str) -> String {
    hex::encode(last.as_bytes())
}

fn decode_token(token: &str) -> Option<String> {
    String::from_utf8(hex::decode(token).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state_with(keys: &[&str]) -> State {
        let mut s = State::new();
        s.create_bucket("b");
        for k in keys {
            s.put("b", k, vec![Bytes::from_static(b"x")], "t".into(), None)
                .unwrap();
        }
        s
    }

    fn names(page: &ListPage) -> (Vec<String>, Vec<String>) {
        (
            page.objects.iter().map(|(k, _)| k.clone()).collect(),
            page.prefixes.clone(),
        )
    }

    #[test]
    fn listing_pages_through_keys_and_prefixes() {
        let mut s = state_with(&["a/1", "a/2", "a/x/1", "a/x/2", "a/y/1", "a/z", "b/1", "a0"]);
        s.page_size = 2;
        let mut q = ListQuery {
            prefix: "a/".into(),
            delimiter: Some("/".into()),
            ..ListQuery::default()
        };
        let mut all = (Vec::new(), Vec::new());
        let mut pages = 0;
        loop {
            let page = s.list("b", &q).unwrap();
            pages += 1;
            let (k, p) = names(&page);
            all.0.extend(k);
            all.1.extend(p);
            match page.next_token {
                Some(t) => q.token = Some(t),
                None => break,
            }
        }
        assert_eq!(all.0, vec!["a/1", "a/2", "a/z"]);
        assert_eq!(all.1, vec!["a/x/", "a/y/"]);
        assert_eq!(pages, 3);
    }

    #[test]
    fn listing_without_delimiter_is_deep_and_prefix_bound() {
        let s = state_with(&["a/1", "a/x/1", "ab", "b"]);
        let q = ListQuery {
            prefix: "a".into(),
            ..ListQuery::default()
        };
        assert_eq!(
            names(&s.list("b", &q).unwrap()).0,
            vec!["a/1", "a/x/1", "ab"]
        );
    }

    #[test]
    fn multipart_assembles_listed_parts_in_order() {
        let mut s = state_with(&[]);
        let id = s.initiate("b", "small", "t".into()).unwrap();
        let e1 = s
            .upload_part("b", "small", &id, 1, vec![Bytes::from_static(b"tiny")])
            .unwrap();
        let e2 = s
            .upload_part("b", "small", &id, 2, vec![Bytes::from_static(b"last")])
            .unwrap();
        let err = s
            .complete("b", "small", &id, &[(1, e1), (2, e2)])
            .unwrap_err();
        assert_eq!((err.status, err.code), (400, "EntityTooSmall"));
        assert_eq!(
            s.pending_uploads(),
            1,
            "a refused completion leaves the upload open"
        );
        s.abort("b", "small", &id).unwrap();

        s.min_part_size = 0;
        let id = s.initiate("b", "big", "application/x".into()).unwrap();
        let e2 = s
            .upload_part("b", "big", &id, 2, vec![Bytes::from_static(b"world")])
            .unwrap();
        let e1 = s
            .upload_part("b", "big", &id, 1, vec![Bytes::from_static(b"hello ")])
            .unwrap();
        assert!(s.object("b", "big").is_none(), "invisible until complete");
        let o = s.complete("b", "big", &id, &[(1, e1), (2, e2)]).unwrap();
        assert_eq!(o.bytes(), b"hello world");
        assert_eq!(o.slice(3..8).concat(), b"lo wo");
        assert_eq!(s.pending_uploads(), 0);
    }

    #[test]
    fn generation_match_zero_means_create_only() {
        let mut s = state_with(&["k"]);
        let err = s.put("b", "k", vec![], "t".into(), Some(0)).unwrap_err();
        assert_eq!(err.status, 412);
        s.put("b", "new", vec![], "t".into(), Some(0)).unwrap();
    }

    #[test]
    fn faults_skip_then_fire_then_expire() {
        let mut s = state_with(&[]);
        s.inject(GcsFault::status(503).on(GcsOp::Put).after(1));
        let req = |op| GcsRequest {
            op,
            bucket: "b".into(),
            name: "k".into(),
        };
        assert_eq!(s.admit(req(GcsOp::Get)), None);
        assert_eq!(s.admit(req(GcsOp::Put)), None);
        assert_eq!(s.admit(req(GcsOp::Put)).map(|f| f.status), Some(503));
        assert_eq!(s.admit(req(GcsOp::Put)), None);
    }
}
