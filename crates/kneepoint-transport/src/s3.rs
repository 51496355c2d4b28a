//! Uploading an artifact archive to S3 (or an S3-compatible server): `PutObject`, or a
//! multipart upload above the part size, SigV4-signed with the same credential sources and
//! HTTP client as the SageMaker transport. No S3 SDK: `aws-sdk-s3` would add a second HTTP
//! stack and several hundred thousand lines to the build for four calls; the signing is
//! `aws-sigv4`'s, and the only XML read is the `UploadId` and error `Code`, found by tag.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};

use crate::client::{https_client, HttpClient};
use crate::sagemaker::sign::{sign_request, SignOptions};
use crate::sagemaker::CredentialSource;
use crate::{ConnectOptions, Error};

/// S3's smallest part (all but the last part of a multipart upload).
pub const MIN_PART_SIZE: usize = 5 * 1024 * 1024;
/// Part size used by default (and the largest single `PutObject` sent).
pub const DEFAULT_PART_SIZE: usize = 64 * 1024 * 1024;

/// `s3://bucket/prefix`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    /// The bucket.
    pub bucket: String,
    /// The key prefix (no leading or trailing `/`; may be empty).
    pub prefix: String,
}

impl S3Location {
    /// Parses `s3://bucket[/prefix]`.
    pub fn parse(url: &str) -> Result<Self, Error> {
        let bad = |reason: &str| Error::InvalidUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| bad("an S3 location starts with s3://"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let valid = (3..=63).contains(&bucket.len())
            && bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
            && !bucket.starts_with(['-', '.'])
            && !bucket.ends_with(['-', '.']);
        if !valid {
            return Err(bad(
                "the bucket name must be 3-63 lowercase letters, digits, dots or hyphens",
            ));
        }
        Ok(S3Location {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
        })
    }

    /// The key of `name` under the prefix.
    pub fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.prefix)
        }
    }
}

/// An S3 client for uploading (and reading back) objects.
pub struct S3Client {
    client: HttpClient,
    credentials: Arc<dyn CredentialSource>,
    region: String,
    endpoint: Option<String>,
    part_size: usize,
    timeout: Duration,
}

impl std::fmt::Debug for S3Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Client")
            .field("region", &self.region)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// Percent-encodes a key for the path (everything but unreserved characters and `/`).
fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The text of the first `<tag>...</tag>` in `xml`.
fn tag<'a>(xml: &'a str, tag: &str) -> Option<&'a str> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{tag}>"))? + start;
    Some(&xml[start..end])
}

fn s3_error(operation: &'static str, key: &str, reason: impl Into<String>) -> Error {
    Error::S3 {
        operation,
        key: key.to_owned(),
        reason: reason.into(),
    }
}

impl S3Client {
    /// A client for `region`; `endpoint` (an S3-compatible server, `http://127.0.0.1:9000`)
    /// switches to path-style addressing.
    pub fn new(
        region: &str,
        endpoint: Option<&str>,
        credentials: Arc<dyn CredentialSource>,
        options: &ConnectOptions,
    ) -> Result<Self, Error> {
        if let Some(e) = endpoint {
            let uri: http::Uri =
                e.parse()
                    .map_err(|x: http::uri::InvalidUri| Error::InvalidUrl {
                        url: crate::redact_url(e),
                        reason: x.to_string(),
                    })?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(Error::InvalidUrl {
                    url: crate::redact_url(e),
                    reason: "an S3 endpoint is an http(s)://host[:port] URL".into(),
                });
            }
        }
        Ok(S3Client {
            client: https_client(Some(Duration::from_secs(10)), options, None)?,
            credentials,
            region: region.to_owned(),
            endpoint: endpoint.map(|e| e.trim_end_matches('/').to_owned()),
            part_size: DEFAULT_PART_SIZE,
            timeout: Duration::from_secs(600),
        })
    }

    /// Objects above `bytes` go up in parts of `bytes` (at least [`MIN_PART_SIZE`] for AWS;
    /// any size ≥ 1 for other servers).
    pub fn with_part_size(mut self, bytes: usize) -> Self {
        self.part_size = bytes.max(1);
        self
    }

    /// The URL of `key` in `bucket`.
    pub fn url(&self, bucket: &str, key: &str) -> String {
        let key = encode_key(key);
        match &self.endpoint {
            Some(e) => format!("{e}/{bucket}/{key}"),
            // Dotted bucket names do not match the wildcard certificate: path style.
            None if bucket.contains('.') => {
                format!("https://s3.{}.amazonaws.com/{bucket}/{key}", self.region)
            }
            None => format!("https://{bucket}.s3.{}.amazonaws.com/{key}", self.region),
        }
    }

    async fn call(
        &self,
        operation: &'static str,
        method: &str,
        url: &str,
        key: &str,
        body: Bytes,
    ) -> Result<(http::HeaderMap, Bytes), Error> {
        let uri: http::Uri = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| s3_error(operation, key, e.to_string()))?;
        let host = uri
            .authority()
            .map(|a| a.to_string())
            .ok_or_else(|| s3_error(operation, key, "no host"))?;
        let creds = self
            .credentials
            .credentials()
            .await
            .map_err(|e| s3_error(operation, key, format!("AWS credentials: {e}")))?;
        let length = body.len().to_string();
        let headers = [("host", host.as_str()), ("content-length", length.as_str())];
        let options = SignOptions {
            content_sha256_header: true,
            s3_path: true,
            ..SignOptions::default()
        };
        let signed = sign_request(
            method,
            url,
            &headers,
            &body,
            &creds,
            &self.region,
            "s3",
            SystemTime::now(),
            options,
        )
        .map_err(|e| s3_error(operation, key, e))?;
        let mut req = http::Request::builder().method(method).uri(uri);
        for (k, v) in headers.iter().copied() {
            req = req.header(k, v);
        }
        for (k, v) in &signed {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req
            .body(Full::new(body))
            .map_err(|e| s3_error(operation, key, e.to_string()))?;
        let exchange = async {
            let resp = self.client.request(req).await.map_err(|e| {
                s3_error(
                    operation,
                    key,
                    crate::client::send_error("S3", e).to_string(),
                )
            })?;
            let status = resp.status();
            let headers = resp.headers().clone();
            let text = Limited::new(resp.into_body(), 256 * 1024 * 1024)
                .collect()
                .await
                .map_err(|e| s3_error(operation, key, format!("reading the answer: {e}")))?
                .to_bytes();
            let lossy = String::from_utf8_lossy(&text);
            // CompleteMultipartUpload may answer 200 with an error inside.
            if !status.is_success() || (method == "POST" && lossy.contains("<Error>")) {
                return Err(s3_error(
                    operation,
                    key,
                    format!(
                        "HTTP {}{}",
                        status.as_u16(),
                        tag(&lossy, "Code")
                            .map(|c| format!(" {c}: {}", tag(&lossy, "Message").unwrap_or("")))
                            .unwrap_or_default()
                    ),
                ));
            }
            Ok((headers, text))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| {
                s3_error(
                    operation,
                    key,
                    format!("no answer within {} s", self.timeout.as_secs()),
                )
            })?
    }

    /// Uploads `body` to `key` in `bucket`: one `PutObject` up to the part size, a multipart
    /// upload above it (aborted on failure). Returns the object's ETag.
    pub async fn put(&self, bucket: &str, key: &str, body: Bytes) -> Result<String, Error> {
        let url = self.url(bucket, key);
        let etag = |h: &http::HeaderMap| {
            h.get(http::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        if body.len() <= self.part_size {
            let (h, _) = self.call("PutObject", "PUT", &url, key, body).await?;
            return Ok(etag(&h));
        }
        let (_, text) = self
            .call(
                "CreateMultipartUpload",
                "POST",
                &format!("{url}?uploads"),
                key,
                Bytes::new(),
            )
            .await?;
        let text = String::from_utf8_lossy(&text).into_owned();
        let id = tag(&text, "UploadId")
            .ok_or_else(|| s3_error("CreateMultipartUpload", key, "no UploadId in the answer"))?
            .to_owned();
        let id_q = encode_key(&id).replace('/', "%2F");
        let parts = async {
            let mut done = String::from("<CompleteMultipartUpload>");
            for (i, start) in (0..body.len()).step_by(self.part_size).enumerate() {
                let end = (start + self.part_size).min(body.len());
                let n = i + 1;
                let (h, _) = self
                    .call(
                        "UploadPart",
                        "PUT",
                        &format!("{url}?partNumber={n}&uploadId={id_q}"),
                        key,
                        body.slice(start..end),
                    )
                    .await?;
                done.push_str(&format!(
                    "<Part><PartNumber>{n}</PartNumber><ETag>{}</ETag></Part>",
                    etag(&h)
                ));
            }
            done.push_str("</CompleteMultipartUpload>");
            let (_, text) = self
                .call(
                    "CompleteMultipartUpload",
                    "POST",
                    &format!("{url}?uploadId={id_q}"),
                    key,
                    Bytes::from(done),
                )
                .await?;
            Ok::<_, Error>(
                tag(&String::from_utf8_lossy(&text), "ETag")
                    .unwrap_or("")
                    .replace("&quot;", "\""),
            )
        };
        match parts.await {
            Ok(tag) => Ok(tag),
            Err(e) => {
                let _ = self
                    .call(
                        "AbortMultipartUpload",
                        "DELETE",
                        &format!("{url}?uploadId={id_q}"),
                        key,
                        Bytes::new(),
                    )
                    .await;
                Err(e)
            }
        }
    }

    /// Reads `key` back from `bucket` (`GetObject`).
    pub async fn get(&self, bucket: &str, key: &str) -> Result<Bytes, Error> {
        let url = self.url(bucket, key);
        Ok(self
            .call("GetObject", "GET", &url, key, Bytes::new())
            .await?
            .1)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn locations_and_urls() {
        let l = S3Location::parse("s3://my-bucket/runs/2026/").unwrap();
        assert_eq!(
            (l.bucket.as_str(), l.prefix.as_str()),
            ("my-bucket", "runs/2026")
        );
        assert_eq!(l.key("a b.tar.gz"), "runs/2026/a b.tar.gz");
        assert_eq!(S3Location::parse("s3://bkt").unwrap().key("x"), "x");
        for bad in [
            "http://b/x",
            "s3://",
            "s3://UPPER/x",
            "s3://ab",
            "s3://-bad/x",
        ] {
            assert!(S3Location::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(encode_key("a b/c+d.tar.gz"), "a%20b/c%2Bd.tar.gz");
        assert_eq!(
            tag("<a><UploadId>x1</UploadId></a>", "UploadId"),
            Some("x1")
        );
        assert_eq!(tag("<a>", "UploadId"), None);
    }
}
