//! `clothcast watch` against a server that sends bad messages: a WebSocket server of the
//! test's own streams the golden stream (tests/fixtures/codec/v5) as two avatars, with
//! a bad message of each kind between frames. `watch` says what is wrong with each,
//! skips it, asks for a keyframe after a refused frame, and streams on.

use std::process::{Command, Stdio};
use std::time::Duration;

use clothcast::protocol::{
    AssetMessage, ClientMessage, FrameMessage, PROTOCOL_VERSION, ResyncMessage, ServerMessage,
};
use futures_util::{SinkExt, StreamExt};
use serde_bytes::ByteBuf;
use tokio_tungstenite::tungstenite::Message;

use super::clients::finish;

fn golden(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/codec/v5")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The frames of a golden stream: each a u32 little-endian length, then the frame.
fn records(stream: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= stream.len() {
        let n = u32::from_le_bytes(stream[at..at + 4].try_into().expect("4 bytes")) as usize;
        out.push(stream[at + 4..at + 4 + n].to_vec());
        at += 4 + n;
    }
    out
}

fn asset(hash: &str, setup: &[u8]) -> Message {
    let m = ServerMessage::Asset(AssetMessage {
        hash: hash.into(),
        garment: "tshirt".into(),
        setup: ByteBuf::from(setup.to_vec()),
        body_positions: ByteBuf::new(),
        body_triangles: ByteBuf::new(),
        body_joints: ByteBuf::new(),
        body_weights: ByteBuf::new(),
        skeleton: ByteBuf::new(),
        parents: Vec::new(),
    });
    Message::Binary(m.to_msgpack().expect("encodes").into())
}

fn frame(avatar: &str, seq: u32, hash: &str, garment: &[u8]) -> Message {
    let m = ServerMessage::Frame(FrameMessage {
        avatar: avatar.into(),
        seq,
        timestamp: f64::from(seq) / 30.0,
        pose_timestamp: f64::from(seq) / 30.0,
        asset: hash.into(),
        pose: ByteBuf::new(),
        world: [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        garment: ByteBuf::from(garment.to_vec()),
        layers: Vec::new(),
    });
    Message::Binary(m.to_msgpack().expect("encodes").into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_names_a_servers_bad_messages_skips_them_and_streams_on() {
    let setup = golden("setup.bin");
    let recs = records(&golden("stream.bin"));
    let last_frame = recs.len() - 1;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let url = format!("ws://{}/ws", listener.local_addr().expect("addr"));
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.expect("watch connects");
        let mut ws = tokio_tungstenite::accept_async(tcp)
            .await
            .expect("handshake");
        let _hello = ws.next().await;
        let welcome = ServerMessage::Welcome {
            version: PROTOCOL_VERSION,
            tick_hz: 30.0,
            assets: vec!["a1".into()],
        };
        let mut out = vec![
            Message::Binary(welcome.to_msgpack().expect("encodes").into()),
            asset("a1", &setup),
        ];
        // a bad message every third tick; x's frame 5 truncated (x then cannot decode
        // until the stream's keyframe at 16: this server ignores resync)
        let bad = [
            Message::Binary(vec![0xc1].into()),
            Message::Text("not json".into()),
            frame("x", 99, "nope", &recs[1]),
            // (with a terminal title sequence, which watch must not pass on)
            Message::Text(
                r#"{"type": "error", "code": "rate", "message": "slow down\u001b]0;pwned\u0007"}"#
                    .into(),
            ),
            asset("a2", &[1, 2, 3]),
        ];
        let mut bad = bad.into_iter();
        for (seq, rec) in recs.iter().enumerate() {
            let seq = seq as u32;
            let x = if seq == 5 { &rec[..41] } else { &rec[..] };
            out.push(frame("x", seq, "a1", x));
            out.push(frame("y", seq, "a1", rec));
            if seq % 3 == 1
                && let Some(b) = bad.next()
            {
                out.push(b);
            }
            for m in out.drain(..) {
                if ws.send(m).await.is_err() {
                    return Vec::new();
                }
            }
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        // what watch said, until it leaves
        let mut said = Vec::new();
        while let Some(Ok(m)) = ws.next().await {
            said.push(m);
        }
        said
    });
    let watch = Command::new(env!("CARGO_BIN_EXE_clothcast"))
        .args(["watch", "--url", &url, "--seconds", "3", "--no-reconnect"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("clothcast watch runs");
    let (status, out, err) = finish(watch).await;
    assert!(status.success(), "watch failed: {status}\n{out}\n{err}");
    for named in [
        "bad MessagePack",
        "expected ident at line 1 column 2; skipped",
        "frame of x for unknown asset nope (asked for again); skipped",
        "server error rate: slow down\\u{1b}]0;pwned\\u{7}; skipped",
        "truncated setup header; skipped",
        "avatar x: frame refused: truncated frame payload; asking for a keyframe",
    ] {
        assert!(
            err.contains(named),
            "{named:?} missing from watch's stderr:\n{err}"
        );
    }
    assert!(!err.contains('\u{1b}') && !out.contains('\u{1b}'), "{err}");
    // both avatars streamed to the end: y every frame, x again from the keyframe
    for avatar in ["x", "y"] {
        let last = out
            .lines()
            .rfind(|l| l.trim_start().starts_with(&format!("{avatar}:")))
            .unwrap_or_else(|| panic!("watch printed no line for {avatar}:\n{out}"));
        assert!(
            last.contains(&format!("frame {last_frame}")),
            "{avatar}: {last}\n{out}"
        );
    }
    // and it asked this server for x's keyframe
    let said = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server's connection ends with watch")
        .expect("the server task");
    let resyncs: Vec<_> = said
        .iter()
        .filter_map(|m| match m {
            Message::Binary(b) => ClientMessage::from_msgpack(b).ok(),
            _ => None,
        })
        .filter(|m| matches!(m, ClientMessage::Resync(_)))
        .collect();
    assert_eq!(
        resyncs.first(),
        Some(&ClientMessage::Resync(ResyncMessage {
            avatars: vec!["x".into()],
            assets: vec![],
        })),
        "watch's messages: {said:?}"
    );
}
