//! `source_addrs`: new connections come from each listed local address in turn, so that one
//! process can open more streams to one endpoint than one address's ports allow. Checked with
//! a loopback server that records each connection's peer address (127.0.0.0/8 is all local
//! on Linux; elsewhere the test is skipped when 127.0.0.2 cannot be bound).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kneepoint_transport::{parse_source_addrs, ConnectOptions, Fetcher, ProxySetting};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_alternate_between_the_source_addresses() {
    if std::net::TcpListener::bind("127.0.0.2:0").is_err() {
        eprintln!("skipped: 127.0.0.2 cannot be bound here");
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let peers: Arc<Mutex<BTreeMap<IpAddr, usize>>> = Arc::default();
    let seen = peers.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, peer)) = listener.accept().await {
            *seen.lock().unwrap().entry(peer.ip()).or_default() += 1;
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                loop {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    // Slow enough that every request is in flight at once: one connection each.
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if sock.write_all(reply).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let options = ConnectOptions {
        source_addrs: parse_source_addrs("127.0.0.2-127.0.0.3").unwrap(),
        proxy: ProxySetting::Off,
        ..Default::default()
    };
    let fetcher = Fetcher::new(&options).unwrap();
    let url: http::Uri = format!("http://{addr}/").parse().unwrap();
    let gets = (0..8).map(|_| fetcher.get(&url, Duration::from_secs(30), 1024));
    for r in futures_util::future::join_all(gets).await {
        assert_eq!(r.unwrap().status, 200);
    }
    let peers = peers.lock().unwrap().clone();
    let two: IpAddr = "127.0.0.2".parse().unwrap();
    let three: IpAddr = "127.0.0.3".parse().unwrap();
    assert_eq!(
        peers.keys().copied().collect::<Vec<_>>(),
        [two, three],
        "{peers:?}"
    );
    assert_eq!(peers.values().sum::<usize>(), 8);
    assert_eq!((peers[&two], peers[&three]), (4, 4), "in turn: {peers:?}");
}

#[tokio::test]
async fn an_address_that_is_not_local_fails_to_connect_with_a_clear_error() {
    // TEST-NET-1 is never assigned to this host: binding to it fails at connect time.
    let options = ConnectOptions {
        source_addrs: parse_source_addrs("192.0.2.7").unwrap(),
        proxy: ProxySetting::Off,
        ..Default::default()
    };
    let fetcher = Fetcher::new(&options).unwrap();
    let url: http::Uri = "http://127.0.0.1:9/".parse().unwrap();
    let err = fetcher
        .get(&url, Duration::from_secs(10), 1024)
        .await
        .unwrap_err();
    // The bind fails, not the connection (nothing listens on port 9 either).
    assert!(err.to_lowercase().contains("bind"), "{err}");
}
