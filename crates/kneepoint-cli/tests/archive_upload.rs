//! `--archive` and `--output-s3` against an in-process S3 server on loopback that checks every
//! SigV4 signature (S3's single-encoded paths, signed payload hashes): a sweep's folder goes up
//! as one `PutObject`, a larger body as a multipart upload, and both read back byte for byte.
//! CI also uploads to moto's S3 server (`scripts/real_servers/test_s3.py`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_credential_types::Credentials;
use kneepoint_transport::s3::S3Client;
use kneepoint_transport::sagemaker::sign::verify_request;
use kneepoint_transport::sagemaker::StaticCredentials;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

const KEY: &str = "AKIDKNEEPOINTTEST";
const SECRET: &str = "kneepoint-test-secret-do-not-use";

#[derive(Default)]
struct Store {
    objects: BTreeMap<String, Vec<u8>>,
    parts: BTreeMap<(String, u32), Vec<u8>>,
    calls: Vec<String>,
    headers: Vec<String>,
    rejected: usize,
}

fn creds() -> Credentials {
    Credentials::new(KEY, SECRET, None, None, "test")
}

/// A minimal S3: PUT/GET objects, multipart create/part/complete, SigV4 checked on each.
async fn fake_s3() -> (String, Arc<Mutex<Store>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let store = Arc::new(Mutex::new(Store::default()));
    let st = store.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let st = st.clone();
            tokio::spawn(async move {
                let (r, mut w) = sock.into_split();
                let mut r = BufReader::new(r);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let mut it = line.split_whitespace();
                    let (method, target) =
                        (it.next().unwrap().to_owned(), it.next().unwrap().to_owned());
                    let mut headers = Vec::new();
                    loop {
                        let mut h = String::new();
                        r.read_line(&mut h).await.unwrap();
                        let h = h.trim_end();
                        if h.is_empty() {
                            break;
                        }
                        let (k, v) = h.split_once(':').unwrap();
                        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
                    }
                    let len: usize = headers
                        .iter()
                        .find(|(k, _)| k == "content-length")
                        .map_or(0, |(_, v)| v.parse().unwrap());
                    let mut body = vec![0; len];
                    r.read_exact(&mut body).await.unwrap();
                    let host = headers.iter().find(|(k, _)| k == "host").unwrap().1.clone();
                    let full = format!("http://{host}{target}");
                    let hv: Vec<(&str, &str)> = headers
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    let ok = verify_request(&method, &full, &hv, &body, &creds()).is_ok();
                    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
                    let (status, extra, reply) = {
                        let mut s = st.lock().unwrap();
                        s.calls.push(format!("{method} {query}"));
                        s.headers
                            .extend(headers.iter().map(|(k, v)| format!("{k}: {v}")));
                        if !ok {
                            s.rejected += 1;
                            (403, String::new(), b"<Error><Code>SignatureDoesNotMatch</Code><Message>no</Message></Error>".to_vec())
                        } else {
                            let q: BTreeMap<&str, &str> = query
                                .split('&')
                                .filter(|x| !x.is_empty())
                                .map(|x| x.split_once('=').unwrap_or((x, "")))
                                .collect();
                            match (method.as_str(), q.contains_key("uploads"), q.get("partNumber"), q.get("uploadId")) {
                                ("POST", true, _, _) => (200, String::new(), b"<InitiateMultipartUploadResult><UploadId>up-1</UploadId></InitiateMultipartUploadResult>".to_vec()),
                                ("PUT", _, Some(n), Some(_)) => {
                                    s.parts.insert((path.to_owned(), n.parse().unwrap()), body);
                                    (200, format!("ETag: \"part-{n}\"\r\n"), Vec::new())
                                }
                                ("POST", _, _, Some(_)) => {
                                    let text = String::from_utf8_lossy(&body).into_owned();
                                    let n = text.matches("<Part>").count() as u32;
                                    let mut all = Vec::new();
                                    for i in 1..=n {
                                        assert!(text.contains(&format!("<PartNumber>{i}</PartNumber><ETag>\"part-{i}\"</ETag>")));
                                        all.extend(s.parts.remove(&(path.to_owned(), i)).unwrap());
                                    }
                                    s.objects.insert(path.to_owned(), all);
                                    (200, String::new(), b"<CompleteMultipartUploadResult><ETag>&quot;multi&quot;</ETag></CompleteMultipartUploadResult>".to_vec())
                                }
                                ("PUT", ..) => {
                                    s.objects.insert(path.to_owned(), body);
                                    (200, "ETag: \"single\"\r\n".to_owned(), Vec::new())
                                }
                                ("GET", ..) => match s.objects.get(path) {
                                    Some(b) => (200, String::new(), b.clone()),
                                    None => (404, String::new(), b"<Error><Code>NoSuchKey</Code><Message>none</Message></Error>".to_vec()),
                                },
                                _ => (400, String::new(), Vec::new()),
                            }
                        }
                    };
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n{extra}\r\n",
                        reply.len()
                    );
                    if w.write_all(head.as_bytes()).await.is_err()
                        || w.write_all(&reply).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (url, store)
}

fn client(url: &str, secret: &str) -> S3Client {
    let c = Credentials::new(KEY, secret, None, None, "test");
    S3Client::new(
        "us-east-1",
        Some(url),
        Arc::new(StaticCredentials(c)),
        &kneepoint_transport::ConnectOptions::default(),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_is_archived_uploaded_and_read_back_byte_for_byte() {
    let (url, store) = fake_s3().await;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run one");
    let s = common::fast_sweep(
        "4",
        &[
            "--concurrency",
            "2",
            "--request-count",
            "4",
            "--output-s3",
            "s3://kneepoint-results/runs/2026",
            "--s3-endpoint-url",
            &url,
        ],
        &dir,
    )
    .unwrap();
    assert!(s.common.publish.archive, "--output-s3 implies --archive");
    kneepoint_cli::run_sweep(&s, false).await.unwrap();
    // The credential chain reads these (the test's own, never real ones); nothing ambient
    // (a session token, a profile, the shared files) may change which credentials it picks.
    for v in [
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ] {
        std::env::remove_var(v);
    }
    let none = tmp.path().join("no-aws-files");
    std::env::set_var("AWS_CONFIG_FILE", &none);
    std::env::set_var("AWS_SHARED_CREDENTIALS_FILE", &none);
    std::env::set_var("AWS_ACCESS_KEY_ID", KEY);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET);
    let done = s.common.publish.run(&dir).await.unwrap().unwrap();
    assert_eq!(done.archive, tmp.path().join("run one.tar.gz"));
    let local = std::fs::read(&done.archive).unwrap();
    let (where_, etag) = done.uploaded.unwrap();
    assert_eq!(where_, "s3://kneepoint-results/runs/2026/run one.tar.gz");
    assert_eq!(etag, "\"single\"");
    let back = client(&url, SECRET)
        .get("kneepoint-results", "runs/2026/run one.tar.gz")
        .await
        .unwrap();
    assert_eq!(back.as_ref(), local.as_slice());
    // The archive holds the level files and the run log.
    let mut names = Vec::new();
    let mut a = tar::Archive::new(flate2::read::GzDecoder::new(&local[..]));
    for e in a.entries().unwrap() {
        names.push(e.unwrap().path().unwrap().display().to_string());
    }
    for want in [
        "run one/logs/kneepoint.log",
        "run one/concurrency_2/profile_export.jsonl",
        "run one/sweep_summary.json",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    let s = store.lock().unwrap();
    assert_eq!(s.rejected, 0, "{:?}", s.calls);
    // Every request was signed with the key id, and the secret itself never went on the wire.
    assert!(s
        .headers
        .iter()
        .any(|h| h.starts_with("authorization: AWS4-HMAC-SHA256 Credential=AKIDKNEEPOINTTEST/")));
    assert!(s
        .headers
        .iter()
        .any(|h| h.starts_with("x-amz-content-sha256: ")));
    assert!(!s.headers.iter().any(|h| h.contains(SECRET)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_go_up_in_parts_and_bad_signatures_are_clear_errors() {
    let (url, store) = fake_s3().await;
    let body: Vec<u8> = (0..2_500_000u32).map(|i| (i % 251) as u8).collect();
    let c = client(&url, SECRET).with_part_size(1_000_000);
    let etag = c
        .put("bkt", "big/obj.bin", body.clone().into())
        .await
        .unwrap();
    assert_eq!(etag, "\"multi\"");
    assert_eq!(
        c.get("bkt", "big/obj.bin").await.unwrap().as_ref(),
        body.as_slice()
    );
    {
        let s = store.lock().unwrap();
        assert_eq!(s.rejected, 0);
        let parts = s
            .calls
            .iter()
            .filter(|c| c.starts_with("PUT partNumber="))
            .count();
        assert_eq!(parts, 3, "{:?}", s.calls);
    }
    let wrong = client(&url, "not-the-secret");
    let err = wrong
        .put("bkt", "x", vec![1, 2, 3].into())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("PutObject") && err.contains("403") && err.contains("SignatureDoesNotMatch"),
        "{err}"
    );
    assert!(!err.contains("not-the-secret"));
    let missing = c.get("bkt", "nope").await.unwrap_err().to_string();
    assert!(missing.contains("NoSuchKey"), "{missing}");
}
