//! A level kept loaded (a lead-in, the measured requests, fillers until the last measured one
//! ends) against a transport that answers without ever waiting (an in-process model, a cache,
//! `Model::instant`): the fillers used to spin on the runtime's threads without yielding, so
//! the last measured requests never ran again and the level never ended (found while trying a
//! library sweep with the default levels). Run on a runtime of its own, watched from this
//! thread, so a regression fails in a minute instead of hanging.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kneepoint_engine::BenchOptions;
use std::sync::Arc;
use std::time::Duration;

use kneepoint_engine::{CancelToken, LevelSettings, Sweep};
use kneepoint_testkit::{MockTransport, Model};
use kneepoint_workload::{load_tokenizer, LengthDist, SyntheticWorkload};

#[test]
fn a_kept_loaded_level_ends_against_a_transport_that_never_waits() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let sent = rt.block_on(async {
            let tmp = tempfile::tempdir().unwrap();
            let (t, _) = MockTransport::new(Model::instant(2));
            let mut s = LevelSettings::default();
            s.request_count = 512;
            s.lead_in = Some(256);
            let w = SyntheticWorkload::new(
                load_tokenizer("builtin").unwrap(),
                LengthDist::Fixed(8),
                LengthDist::Fixed(2),
                1,
            )
            .unwrap();
            Sweep::builder(Arc::new(t))
                .workload(w)
                .settings(s)
                .levels([64, 256])
                .artifacts(tmp.path())
                .build()
                .unwrap()
                .run(&CancelToken::new())
                .await
                .unwrap()
                .sent
        });
        let _ = done_tx.send(sent);
    });
    let sent = done_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the kept-loaded level never ended");
    assert_eq!(sent, vec![512, 512]);
}
