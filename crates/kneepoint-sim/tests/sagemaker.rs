//! The simulator's SageMaker runtime protocol, driven by kneepoint's SageMaker transport:
//! signed requests, both operations, OpenAI and TGI bodies, event-stream framing with payloads
//! split across parts, error wrapping and the protocol's stream faults.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;

use aws_credential_types::Credentials;
use futures_util::StreamExt;
use kneepoint_core::{ApproxTokenCounter, Error, ErrorKind, Request, ResponseEvent, Transport};
use kneepoint_sim::{Fault, FaultPlan, SigV4TestKey, SimOptions, SimProfile, SimServer};
use kneepoint_transport::sagemaker::{
    BodyFormat, InvokeHeaders, SageMakerConfig, SageMakerTransport, StaticCredentials,
};

const KEY_ID: &str = "AKIDKNEEPOINTTEST";
const SECRET: &str = "kneepoint/test/secret/key/0123456789";

async fn server(profile: SimProfile) -> SimServer {
    SimServer::start_with_options(
        profile,
        SocketAddr::from(([127, 0, 0, 1], 0)),
        Arc::new(ApproxTokenCounter),
        SimOptions {
            sigv4: Some(SigV4TestKey {
                access_key_id: KEY_ID.into(),
                secret_access_key: SECRET.into(),
            }),
            endpoint_name: Some("my-endpoint".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap()
}

fn transport(
    s: &SimServer,
    body: BodyFormat,
    streaming: bool,
    secret: &str,
    name: &str,
) -> SageMakerTransport {
    let mut c = SageMakerConfig::new(name, "us-west-2");
    c.endpoint_url = Some(s.base_url());
    c.body = body;
    c.streaming = streaming;
    c.model = "m".into();
    c.headers = InvokeHeaders {
        inference_component: Some("ic-1".into()),
        custom_attributes: Some("trace=1".into()),
        ..InvokeHeaders::default()
    };
    let creds = Credentials::new(KEY_ID, secret, None, None, "test");
    SageMakerTransport::new(c, Arc::new(StaticCredentials(creds))).unwrap()
}

fn request(id: u64) -> Request {
    let mut r = Request::text(id, vec!["word"; 40].join(" "));
    r.max_output_tokens = Some(12);
    r.ignore_eos = true;
    r
}

async fn run(
    t: &SageMakerTransport,
    r: &Request,
) -> Result<(String, Option<u32>, Option<String>), Error> {
    let mut s = t.send(r).await?;
    let (mut text, mut completion, mut finish) = (String::new(), None, None);
    while let Some(ev) = s.next().await {
        match ev? {
            ResponseEvent::Chunk(c) => text.push_str(&c.text),
            ResponseEvent::Usage(u) => completion = u.completion_tokens.or(completion),
            ResponseEvent::Finish { reason } => finish = reason,
            _ => {}
        }
    }
    Ok((text, completion, finish))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_operations_and_both_body_formats() {
    let s = server(SimProfile::fast()).await;
    for body in [
        BodyFormat::OpenAiChat,
        BodyFormat::OpenAiCompletions,
        BodyFormat::Tgi,
    ] {
        for streaming in [true, false] {
            let t = transport(&s, body, streaming, SECRET, "my-endpoint");
            let (text, completion, finish) = run(&t, &request(1)).await.unwrap();
            assert_eq!(text.split_whitespace().count(), 12, "{body:?} {streaming}");
            assert_eq!(completion, Some(12), "{body:?} {streaming}");
            assert_eq!(finish.as_deref(), Some("length"), "{body:?} {streaming}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_and_names_are_checked() {
    let s = server(SimProfile::fast()).await;
    let wrong = transport(
        &s,
        BodyFormat::OpenAiChat,
        true,
        "not-the-secret",
        "my-endpoint",
    );
    let e = run(&wrong, &request(1)).await.unwrap_err();
    assert_eq!(e.status(), Some(403));
    assert!(e.to_string().contains("InvalidSignatureException"), "{e}");
    assert!(!e.to_string().contains("not-the-secret"));
    let other = transport(&s, BodyFormat::OpenAiChat, true, SECRET, "no-such-endpoint");
    let e = run(&other, &request(1)).await.unwrap_err();
    assert_eq!(e.status(), Some(400));
    assert!(e.to_string().contains("ValidationError"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_errors_come_back_as_model_errors() {
    let mut p = SimProfile::fast();
    p.max_model_len = 32; // 40 prompt words + 12 tokens is too long
    let s = server(p).await;
    let t = transport(&s, BodyFormat::OpenAiChat, false, SECRET, "my-endpoint");
    let e = run(&t, &request(1)).await.unwrap_err();
    assert_eq!(e.status(), Some(424));
    let text = e.to_string();
    assert!(
        text.contains("ModelError") && text.contains("container status 400"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_faults_of_the_protocol_are_classified() {
    for (fault, kind, needle) in [
        (
            Fault::ModelStreamError,
            ErrorKind::Server,
            "ModelStreamError",
        ),
        (
            Fault::EventStreamBadCrc,
            ErrorKind::MalformedResponse,
            "event-stream",
        ),
        (Fault::Http429, ErrorKind::HttpStatus, "ThrottlingException"),
        (Fault::Http500, ErrorKind::HttpStatus, "ModelError"),
    ] {
        let mut p = SimProfile::fast();
        p.faults = Some(FaultPlan::new(1.0, vec![fault]));
        let s = server(p).await;
        let t = transport(&s, BodyFormat::OpenAiChat, true, SECRET, "my-endpoint");
        let e = run(&t, &request(1)).await.unwrap_err();
        assert_eq!(e.kind(), kind, "{fault:?}: {e}");
        assert!(e.to_string().contains(needle), "{fault:?}: {e}");
    }
}
