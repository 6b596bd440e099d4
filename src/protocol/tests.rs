//! Tests of the protocol's messages: round trips, the fast `type` paths, the id rules.

use super::*;

#[test]
fn messages_round_trip_in_both_encodings() {
    let pose = ClientMessage::Pose(PoseMessage {
        avatar: "alice".into(),
        profile: "canonical".into(),
        timestamp: 1.5,
        root: Some([0.0, 0.1, 0.0]),
        floor: None,
        joints: vec![JointSample {
            name: "left_shoulder".into(),
            rotation: Some([0.0, 0.0, 0.38, 0.92]),
            position: None,
            confidence: Some(1.0),
        }],
    });
    assert_eq!(
        ClientMessage::from_msgpack(&pose.to_msgpack().expect("encodes")).expect("msgpack"),
        pose
    );
    let json = serde_json::to_string(&pose).expect("json");
    assert!(json.contains("\"type\":\"pose\""), "{json}");
    assert_eq!(ClientMessage::from_json(&json).expect("json"), pose);
    let frame = ServerMessage::Frame(FrameMessage {
        avatar: "a".into(),
        seq: 3,
        timestamp: 0.1,
        pose_timestamp: 0.0,
        asset: "ff".into(),
        pose: ByteBuf::from(vec![0u8; 12]),
        world: [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        garment: ByteBuf::from(vec![1u8, 2, 3]),
        layers: Vec::new(),
    });
    let bytes = frame.to_msgpack().expect("encodes");
    // byte payloads are MessagePack bin (0xc4), not arrays of integers
    assert!(bytes.windows(2).any(|w| w == [0xc4, 3]));
    assert_eq!(ServerMessage::from_msgpack(&bytes).expect("back"), frame);
}

proptest::proptest! {
    /// A pose reads the same through the fast path (its `type` anywhere in the
    /// map) as through serde's tagged enum.
    #[test]
    fn poses_read_as_the_tagged_enum_reads_them(
        avatar in "[a-z0-9-]{1,12}",
        timestamp in -1e6f64..1e6,
        root in proptest::option::of(proptest::array::uniform3(-5.0f32..5.0)),
        floor in proptest::option::of(proptest::array::uniform4(-2.0f32..2.0)),
        joints in proptest::collection::vec(
            ("[a-z_]{1,16}", proptest::option::of(proptest::array::uniform4(-1.0f32..1.0)),
             proptest::option::of(proptest::array::uniform3(-5.0f32..5.0)),
             proptest::option::of(0.0f32..1.0)),
            0..30,
        ),
        tag_at in 0usize..6,
    ) {
        let pose = ClientMessage::Pose(PoseMessage {
            avatar,
            profile: "canonical".into(),
            timestamp,
            root,
            floor,
            joints: joints
                .into_iter()
                .map(|(name, rotation, position, confidence)| JointSample { name, rotation, position, confidence })
                .collect(),
        });
        // the same map with `type` moved to position tag_at
        let serde_json::Value::Object(map) = serde_json::to_value(&pose).expect("value") else {
            panic!("a pose is a map");
        };
        let mut entries: Vec<(String, serde_json::Value)> =
            map.into_iter().filter(|(k, _)| k != "type").collect();
        entries.insert(tag_at.min(entries.len()), ("type".into(), "pose".into()));
        let json = format!(
            "{{{}}}",
            entries
                .iter()
                .map(|(k, v)| format!("{:?}:{}", k, v))
                .collect::<Vec<_>>()
                .join(",")
        );
        let via_enum: ClientMessage = serde_json::from_str(&json).expect("serde reads it");
        proptest::prop_assert_eq!(&ClientMessage::from_json(&json).expect("json"), &via_enum);
        proptest::prop_assert_eq!(&via_enum, &pose);
        let packed = pose.to_msgpack().expect("msgpack");
        let via_enum: ClientMessage = rmp_serde::from_slice(&packed).expect("serde reads it");
        proptest::prop_assert_eq!(&ClientMessage::from_msgpack(&packed).expect("msgpack"), &via_enum);
    }
}

proptest::proptest! {
    /// A frame reads the same through the fast path as through serde's tagged enum.
    #[test]
    fn frames_read_as_the_tagged_enum_reads_them(
        avatar in "[a-z0-9-]{1,12}",
        seq in proptest::prelude::any::<u32>(),
        garment in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
        layers in proptest::collection::vec(
            ("[0-9a-f]{1,24}", proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100)),
            0..4,
        ),
        cut in 0usize..400,
    ) {
        let frame = ServerMessage::Frame(FrameMessage {
            avatar,
            seq,
            timestamp: 2.5,
            pose_timestamp: 2.4,
            asset: "0123abcd".into(),
            pose: ByteBuf::from(vec![7u8; 12]),
            world: [0.0, 0.0, 0.0, 1.0, 0.5, 0.0, -0.5],
            garment: ByteBuf::from(garment),
            layers: layers
                .into_iter()
                .map(|(asset, g)| GarmentLayer { asset, garment: ByteBuf::from(g) })
                .collect(),
        });
        let bytes = frame.to_msgpack().expect("encodes");
        let via_enum: ServerMessage = rmp_serde::from_slice(&bytes).expect("serde reads it");
        proptest::prop_assert_eq!(&via_enum, &frame);
        proptest::prop_assert_eq!(&ServerMessage::from_msgpack(&bytes).expect("reads"), &frame);
        // a truncated frame is refused with serde's error
        let short = &bytes[..cut.min(bytes.len() - 1)];
        let slow = rmp_serde::from_slice::<ServerMessage>(short).expect_err("truncated");
        let fast = ServerMessage::from_msgpack(short).expect_err("truncated");
        proptest::prop_assert_eq!(fast.to_string(), format!("bad MessagePack: {slow}"));
    }
}

#[test]
fn values_nested_as_deep_as_a_message_allows_are_refused_without_overflow() {
    // 64 KB of one-element arrays (MessagePack 0x91, JSON '[') in a pose's unknown
    // field and in place of its joints, read on a thread with a 2 MB stack (a tokio
    // worker's): the readers' depth limits refuse them, nothing overflows
    let deep = 64 * 1024 - 64;
    let mut cases: Vec<(bool, Vec<u8>)> = Vec::new();
    for field in ["extra", "joints"] {
        let mut mp = vec![0x82, 0xa4];
        mp.extend_from_slice(b"type");
        mp.extend_from_slice(&[0xa4]);
        mp.extend_from_slice(b"pose");
        mp.push(0xa0 | field.len() as u8);
        mp.extend_from_slice(field.as_bytes());
        mp.extend(std::iter::repeat_n(0x91, deep));
        mp.push(0xc0);
        cases.push((true, mp));
        let mut js = format!("{{\"type\":\"pose\",\"{field}\":").into_bytes();
        js.extend(std::iter::repeat_n(b'[', deep));
        cases.push((false, js));
    }
    // and with the type last, so the reader scans for it first
    let mut mp = vec![0x82, 0xa1, b'x'];
    mp.extend(std::iter::repeat_n(0x91, deep));
    mp.push(0xc0);
    mp.extend_from_slice(&[0xa4, b't', b'y', b'p', b'e', 0xa4, b'p', b'o', b's', b'e']);
    cases.push((true, mp));
    let all_refused = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            cases.iter().all(|(msgpack, bytes)| {
                if *msgpack {
                    ClientMessage::from_msgpack(bytes).is_err()
                } else {
                    ClientMessage::from_json(std::str::from_utf8(bytes).unwrap_or("")).is_err()
                }
            })
        })
        .expect("thread")
        .join()
        .expect("no overflow");
    assert!(all_refused);
}

#[test]
fn bad_messages_are_named() {
    assert!(matches!(
        ClientMessage::from_msgpack(&[0xc1]),
        Err(ProtocolError::MessagePack(_))
    ));
    assert!(matches!(
        ClientMessage::from_json("{\"type\":\"pose\"}"),
        Err(ProtocolError::Json(_))
    ));
    assert!(ClientMessage::from_json("{\"type\":\"launch\"}").is_err());
    // a bad pose gets the error serde's tagged enum gives, in both encodings, after
    // the message's type and the field where there is one (and whatever that path
    // reads, the fast one reads the same)
    let unplaced = |e: &str| match e.rfind(" at line ") {
        Some(i)
            if e[i + 9..]
                .split(" column ")
                .all(|n| n.parse::<u32>().is_ok()) =>
        {
            e[..i].to_string()
        }
        _ => e.to_string(),
    };
    let same = |fast: Result<ClientMessage, ProtocolError>,
                slow: Result<ClientMessage, String>,
                what: &str| {
        match (fast, slow) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{what}"),
            (Err(a), Err(b)) => {
                let a = a.to_string();
                assert!(unplaced(&a).ends_with(&unplaced(&b)), "{what}: {a} / {b}");
                assert!(a.contains("`pose` message, "), "{what}: {a}");
                assert!(!a.contains("marker"), "{what}: {a}");
            }
            (a, b) => panic!("{what}: {a:?} / {b:?}"),
        }
    };
    for text in [
        r#"{"type":"pose","avatar":"a","profile":"canonical","timestamp":0}"#,
        r#"{"type":"pose","avatar":"a","profile":"canonical","timestamp":0,"joints":[],"mood":1}"#,
        r#"{"type":"pose","avatar":"a","profile":"canonical","timestamp":"now","joints":[]}"#,
        r#"{"type":"pose","avatar":"a","profile":"canonical","timestamp":0,"joints":[]} x"#,
        r#"{"type":"pose","type":"pose","avatar":"a","profile":"canonical","timestamp":0,"joints":[]}"#,
        r#"{"avatar":"a","type":"pose","profile":"canonical","timestamp":0,"joints":[{"name":1}]}"#,
    ] {
        let slow = serde_json::from_str::<ClientMessage>(text).map_err(|e| e.to_string());
        assert!(
            slow.is_err() || text.contains(r#""type":"pose","type""#),
            "{text}"
        );
        same(ClientMessage::from_json(text), slow, text);
        let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
            continue;
        };
        let packed = rmp_serde::to_vec_named(&value).expect("msgpack");
        let slow = rmp_serde::from_slice::<ClientMessage>(&packed).map_err(|e| e.to_string());
        same(ClientMessage::from_msgpack(&packed), slow, text);
    }
    assert!(
        ClientMessage::from_json("{\"type\":\"hello\",\"version\":\"one\",\"role\":\"viewer\"}")
            .is_err()
    );
    // a second `type` after a leading "pose" (the peek routes it to the pose
    // reader, which must not simply skip it): whatever serde's enum says
    let mut packed = vec![0x87, 0xa4];
    packed.extend_from_slice(b"type");
    packed.push(0xa4);
    packed.extend_from_slice(b"pose");
    for (key, value) in [
        ("avatar", serde_json::json!("a")),
        ("profile", serde_json::json!("canonical")),
        ("timestamp", serde_json::json!(0.0)),
        ("joints", serde_json::json!([])),
        ("type", serde_json::json!("subscribe")),
        ("avatars", serde_json::json!(null)),
    ] {
        packed.extend(rmp_serde::to_vec(key).expect("key"));
        packed.extend(rmp_serde::to_vec(&value).expect("value"));
    }
    let slow = rmp_serde::from_slice::<ClientMessage>(&packed).map_err(|e| e.to_string());
    same(
        ClientMessage::from_msgpack(&packed),
        slow,
        "msgpack, two types",
    );
    let text = r#"{"type":"pose","avatar":"a","profile":"canonical","timestamp":0,"joints":[],"type":"subscribe","avatars":null}"#;
    let slow = serde_json::from_str::<ClientMessage>(text).map_err(|e| e.to_string());
    same(ClientMessage::from_json(text), slow, text);
}

/// The leading-`type` peek reads what our writers write, declines anything else
/// (the scan then decides), and never reads past the input.
#[test]
fn leading_type_peek() {
    let hello = ClientMessage::Hello(HelloMessage {
        version: 1,
        role: Role::Viewer,
        token: None,
        sensor: None,
    });
    let packed = hello.to_msgpack().expect("msgpack");
    assert_eq!(leading_type_msgpack(&packed), Some("hello"));
    let text = serde_json::to_string(&hello).expect("json");
    assert_eq!(leading_type_json(&text), Some("hello"));
    assert_eq!(
        leading_type_json(" \n{ \"type\" :\t\"pose\" , \"avatar\": 1}"),
        Some("pose")
    );
    for text in [
        r#"{"avatar":"a","type":"pose"}"#,
        r#"{"type":"po\u0073e"}"#,
        r#"{"type":1}"#,
        r#"{"type":"pose"#,
        r#"["type","pose"]"#,
        "",
    ] {
        assert_eq!(leading_type_json(text), None, "{text}");
    }
    let mut value = serde_json::json!({"avatar": "a", "type": "pose"});
    assert_eq!(
        leading_type_msgpack(&rmp_serde::to_vec_named(&value).expect("msgpack")),
        None
    );
    value = serde_json::json!({"type": 7});
    assert_eq!(
        leading_type_msgpack(&rmp_serde::to_vec_named(&value).expect("msgpack")),
        None
    );
    // an empty map followed by what would be a `type` entry is not a leading type
    let mut empty = vec![0x80, 0xa4];
    empty.extend_from_slice(b"type");
    empty.push(0xa4);
    empty.extend_from_slice(b"pose");
    assert_eq!(leading_type_msgpack(&empty), None);
    // a prefix is peeked once it holds the whole `type` entry (map marker, "type",
    // "hello": 12 bytes), and the message it starts is still refused whole
    for cut in 0..packed.len() {
        let short = &packed[..cut];
        assert_eq!(
            leading_type_msgpack(short),
            (cut >= 12).then_some("hello"),
            "cut {cut}"
        );
        assert!(ClientMessage::from_msgpack(short).is_err(), "cut {cut}");
    }
}

proptest::proptest! {
    /// Any bytes: the peek neither panics nor claims a `type` serde would not see
    /// first.
    #[test]
    fn leading_type_peek_is_safe_on_any_bytes(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
        if let Some(kind) = leading_type_msgpack(&bytes) {
            proptest::prop_assert!(bytes.windows(4).any(|w| w == b"type"));
            proptest::prop_assert!(kind.len() < bytes.len());
        }
        if let Ok(text) = std::str::from_utf8(&bytes) {
            let _ = leading_type_json(text);
        }
    }
}

#[test]
fn avatar_ids_without_control_or_invisible_characters_are_valid() {
    for ok in [
        "alice",
        "kinect-kiosk_a-7",
        "vmc-127.0.0.1:39540",
        "Zoë 🎭",
        &"x".repeat(64),
    ] {
        assert!(valid_avatar_id(ok), "{ok:?}");
    }
    for bad in [
        "",
        &"x".repeat(65),
        "tab\there",
        "two\nlines",
        "\u{1b}[2J\u{1b}[Hclear",
        "del\u{7f}",
        "c1\u{9b}31m",
        "rtl\u{202e}evil",
        "zero\u{200b}width",
        "bom\u{feff}",
        "soft\u{ad}hyphen",
    ] {
        assert!(!valid_avatar_id(bad), "{bad:?}");
    }
}

#[test]
fn escaped_text_keeps_one_line_and_no_terminal_controls() {
    let peer = "bad type `x\n2026-12-03T00:00:00Z  INFO clothcast: forged\u{1b}[2J\u{202e}` é 🎭";
    let shown = Escaped(peer).to_string();
    assert_eq!(
        shown,
        "bad type `x\\n2026-12-03T00:00:00Z  INFO clothcast: forged\\u{1b}[2J\\u{202e}` é 🎭"
    );
    // through an error's Display too, and printable text unchanged
    let e = std::io::Error::other("a\rb\tc\u{9b}d");
    assert_eq!(Escaped(&e).to_string(), "a\\rb\\tc\\u{9b}d");
    assert_eq!(Escaped("Zoë 🎭 [ok]").to_string(), "Zoë 🎭 [ok]");
}

proptest::proptest! {
    /// Whatever a peer sends, its escaped form is printable (a valid avatar id's
    /// characters) and, where the text has no backslash of its own (which is kept as
    /// it is), reads back as the original: nothing is lost, only spelled out.
    #[test]
    fn escaped_text_is_printable_and_loses_nothing(text in "\\PC*|[\\x00-\\x{a0}\\u{200b}-\\u{206f}]{0,40}") {
        let shown = Escaped(&text).to_string();
        proptest::prop_assert!(!shown.chars().any(unprintable), "{:?}", shown);
        proptest::prop_assume!(!text.contains('\\'));
        let mut back = String::new();
        let mut rest = shown.as_str();
        while let Some(at) = rest.find('\\') {
            back.push_str(&rest[..at]);
            rest = &rest[at + 1..];
            if let Some(r) = rest.strip_prefix('n') { back.push('\n'); rest = r; }
            else if let Some(r) = rest.strip_prefix('r') { back.push('\r'); rest = r; }
            else if let Some(r) = rest.strip_prefix('t') { back.push('\t'); rest = r; }
            else if let Some(r) = rest.strip_prefix("u{") {
                let end = r.find('}').expect("closed");
                back.push(char::from_u32(u32::from_str_radix(&r[..end], 16).expect("hex")).expect("a char"));
                rest = &r[end + 1..];
            } else { back.push('\\'); }
        }
        back.push_str(rest);
        proptest::prop_assert_eq!(back, text);
    }
}

/// A two-joint, three-vertex body asset as bytes.
fn small_body() -> AssetMessage {
    let f = |v: &[f32]| ByteBuf::from(v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
    AssetMessage {
        hash: "h".into(),
        garment: "tshirt".into(),
        setup: ByteBuf::new(),
        body_positions: f(&[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]),
        body_triangles: ByteBuf::from(
            [0u32, 1, 2]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect::<Vec<u8>>(),
        ),
        body_joints: ByteBuf::from(vec![0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]),
        body_weights: f(&[0.5, 0.5, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]),
        skeleton: f(&[0.0, 1.0, 0.0, 0.0, 1.5, 0.0]),
        parents: vec![-1, 0],
    }
}

#[test]
fn an_assets_body_reads_back_and_every_inconsistency_is_named() {
    let body = small_body().body().expect("a consistent body");
    assert_eq!(body.positions[1], [1.0, 0.0, 0.0]);
    assert_eq!(body.triangles, [[0, 1, 2]]);
    assert_eq!(body.joints[0], [0, 1, 0, 0]);
    assert_eq!(body.skeleton[1], [0.0, 1.5, 0.0]);
    let refused = |change: &dyn Fn(&mut AssetMessage), says: &str| {
        let mut a = small_body();
        change(&mut a);
        match a.body() {
            Err(ProtocolError::BadBody(m)) => assert!(m.contains(says), "{m} (want {says})"),
            other => panic!("{other:?} (want an error naming {says})"),
        }
    };
    refused(&|a| a.body_positions.truncate(35), "body_positions");
    refused(
        &|a| a.body_positions[0..4].copy_from_slice(&f32::NAN.to_le_bytes()),
        "not finite",
    );
    refused(
        &|a| a.body_triangles[4..8].copy_from_slice(&3u32.to_le_bytes()),
        "past 3",
    );
    refused(&|a| a.body_joints[5] = 2, "past 2");
    refused(&|a| a.body_joints.truncate(8), "skin for 2");
    refused(&|a| a.body_weights.truncate(47), "body_weights");
    refused(&|a| a.parents = vec![-1, 1], "parent 1");
    refused(&|a| a.parents = vec![0, 0], "parent 0");
    refused(&|a| a.parents = vec![-1], "2 skeleton joints but 1 parents");
    refused(&|a| a.skeleton.truncate(4), "skeleton");
}

#[test]
fn a_frames_body_pose_reads_back_and_bad_ones_are_named() {
    let numbers =
        |v: &[f32]| ByteBuf::from(v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>());
    let frame = |pose: &[f32]| FrameMessage {
        avatar: "a".into(),
        seq: 0,
        timestamp: 0.0,
        pose_timestamp: 0.0,
        asset: "h".into(),
        pose: numbers(pose),
        world: [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        garment: ByteBuf::new(),
        layers: Vec::new(),
    };
    let good = [0.1, 0.2, 0.3, 0.0, 0.0, 0.0, 1.0, 0.0, 0.6, 0.0, 0.8];
    let p = frame(&good).body_pose(2).expect("a good pose");
    assert_eq!(p.translation, [0.1, 0.2, 0.3]);
    assert_eq!(p.rotations, [[0.0, 0.0, 0.0, 1.0], [0.0, 0.6, 0.0, 0.8]]);
    let says = |pose: &[f32], joints: usize, what: &str| match frame(pose).body_pose(joints) {
        Err(ProtocolError::BadBody(m)) => assert!(m.contains(what), "{m} (want {what})"),
        other => panic!("{other:?} (want an error naming {what})"),
    };
    says(&good, 3, "for 3 joints");
    says(&good[..10], 2, "40 bytes");
    let mut nan = good;
    nan[5] = f32::INFINITY;
    says(&nan, 2, "number 5 is not finite");
    let mut long = good;
    long[10] = 2.0;
    says(&long, 2, "joint 1's rotation");
}

#[test]
fn a_frame_of_one_garment_is_written_without_layers() {
    // clients older than outfits read it as before: no `layers` key at all
    let frame = FrameMessage {
        avatar: "a".into(),
        seq: 1,
        timestamp: 0.0,
        pose_timestamp: 0.0,
        asset: "h".into(),
        pose: ByteBuf::new(),
        world: [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0],
        garment: ByteBuf::from(vec![1u8]),
        layers: Vec::new(),
    };
    let bytes = ServerMessage::Frame(frame.clone())
        .to_msgpack()
        .expect("encodes");
    assert!(!bytes.windows(6).any(|w| w == b"layers"));
    let layered = FrameMessage {
        layers: vec![GarmentLayer {
            asset: "g".into(),
            garment: ByteBuf::from(vec![2u8]),
        }],
        ..frame
    };
    let bytes = ServerMessage::Frame(layered.clone())
        .to_msgpack()
        .expect("encodes");
    assert!(bytes.windows(6).any(|w| w == b"layers"));
    assert_eq!(
        ServerMessage::from_msgpack(&bytes).expect("reads"),
        ServerMessage::Frame(layered)
    );
}

#[test]
fn wear_names_one_garment_or_an_outfit_and_bad_outfits_are_named() {
    let outfit = |json: &str| {
        ClientMessage::from_json(json)
            .expect("a wear message")
            .outfit()
            .expect("wear has an outfit")
    };
    assert_eq!(
        outfit(r#"{"type": "wear", "avatar": "a", "garment": "tshirt"}"#),
        Ok(vec!["tshirt".to_string()])
    );
    assert_eq!(
        outfit(r#"{"type": "wear", "avatar": "a", "garments": ["pants", "tshirt"]}"#),
        Ok(vec!["pants".to_string(), "tshirt".to_string()])
    );
    for (json, says) in [
        (r#"{"type": "wear", "avatar": "a"}"#, "not both or neither"),
        (
            r#"{"type": "wear", "avatar": "a", "garment": "x", "garments": ["y"]}"#,
            "not both or neither",
        ),
        (
            r#"{"type": "wear", "avatar": "a", "garments": []}"#,
            "1 to 4 garments, this one 0",
        ),
        (
            r#"{"type": "wear", "avatar": "a", "garments": ["a", "b", "c", "d", "e"]}"#,
            "this one 5",
        ),
        (
            r#"{"type": "wear", "avatar": "a", "garments": ["pants", "tshirt", "pants"]}"#,
            "\"pants\" twice",
        ),
    ] {
        let e = outfit(json).expect_err(json);
        assert!(e.contains(says), "{json}: {e}");
    }
    // the constructor writes one garment the way servers older than outfits read it
    for names in [vec!["tshirt"], vec!["pants", "tshirt"]] {
        let m = ClientMessage::wear("a", &names);
        let back = ClientMessage::from_msgpack(&m.to_msgpack().expect("encodes")).expect("reads");
        assert_eq!(
            back.outfit(),
            Some(Ok(names.iter().map(|n| n.to_string()).collect()))
        );
    }
    let one = serde_json::to_string(&ClientMessage::wear("a", &["tshirt"])).expect("json");
    assert_eq!(one, r#"{"type":"wear","avatar":"a","garment":"tshirt"}"#);
    assert_eq!(ClientMessage::Ping.outfit(), None);
}

/// `shard_of` scales the mixed FNV-1a of the id's bytes to the count (FNV-1a("a") =
/// 0xe40c292c, the published test value, mixed by hand below), spreads numbered ids
/// over the shards, and `check_shard` takes exactly the shards that exist.
#[test]
fn shards_are_fnv1a_of_the_id_and_only_real_shards_pass() {
    let fmix = |mut h: u32| {
        h ^= h >> 16;
        h = h.wrapping_mul(0x85eb_ca6b);
        h ^= h >> 13;
        h = h.wrapping_mul(0xc2b2_ae35);
        h ^ (h >> 16)
    };
    assert_eq!(
        shard_of("a", 1000),
        ((u64::from(fmix(0xe40c_292c)) * 1000) >> 32) as u32
    );
    assert_eq!(
        shard_of("", 7),
        ((u64::from(fmix(0x811c_9dc5)) * 7) >> 32) as u32
    );
    assert_eq!(shard_of("anything", 1), 0);
    assert_eq!(shard_of("anything", 0), 0, "a zero count is read as one");
    for count in [2u32, 3, 4, 8] {
        let mut per = vec![0u32; count as usize];
        for i in 0..400 {
            per[shard_of(&format!("performer-{i}"), count) as usize] += 1;
        }
        let fair = 400 / count;
        assert!(
            per.iter().all(|&n| n > fair / 2 && n < fair * 3 / 2),
            "{count} shards: {per:?}"
        );
    }
    assert!(check_shard(None).is_ok());
    assert!(check_shard(Some([0, 1])).is_ok());
    assert!(check_shard(Some([63, MAX_SHARDS])).is_ok());
    for bad in [[0, 0], [1, 1], [5, 3], [0, MAX_SHARDS + 1]] {
        let e = check_shard(Some(bad)).expect_err("not a shard");
        assert!(e.contains(&format!("[{}, {}]", bad[0], bad[1])), "{e}");
    }
}

/// `ClientMessage::subscribe` and `SubscribeMessage::default()` are what a `subscribe`
/// that leaves its options out means, and write as just that.
#[test]
fn subscribe_with_defaults_is_the_bare_message() {
    let bare = ClientMessage::from_json(r#"{"type": "subscribe"}"#).expect("reads");
    assert_eq!(bare, ClientMessage::subscribe(None));
    assert_eq!(bare, ClientMessage::Subscribe(SubscribeMessage::default()));
    let packed = rmp_serde::to_vec_named(&bare).expect("writes");
    assert_eq!(
        rmp_serde::from_slice::<serde_json::Value>(&packed).expect("a map"),
        serde_json::json!({"type": "subscribe"})
    );
    let names = Some(vec!["alice".to_string()]);
    assert_eq!(
        ClientMessage::from_json(r#"{"type": "subscribe", "avatars": ["alice"]}"#).expect("reads"),
        ClientMessage::subscribe(names.clone())
    );
    let json = serde_json::to_string(&ClientMessage::subscribe(names)).expect("writes");
    assert_eq!(json, r#"{"type":"subscribe","avatars":["alice"]}"#);
}

/// A message of a known type that does not fit its struct is refused naming the type
/// and the field, in both encodings; a message of no known type gets serde's list.
#[test]
fn bad_fields_are_named_with_their_message() {
    let mp = |v: serde_json::Value| {
        let bytes = rmp_serde::to_vec_named(&v).expect("encodes");
        ClientMessage::from_msgpack(&bytes)
            .expect_err("refused")
            .to_string()
    };
    let js = |v: serde_json::Value| {
        ClientMessage::from_json(&v.to_string())
            .expect_err("refused")
            .to_string()
    };
    let cases = [
        (
            serde_json::json!({"type": "subscribe", "shard": [-1, 2]}),
            "`subscribe` message, field `shard[0]`: invalid value: integer `-1`, expected u32",
        ),
        (
            serde_json::json!({"type": "subscribe", "compact": "yes"}),
            "`subscribe` message, field `compact`: invalid type: string \"yes\", expected a boolean",
        ),
        (
            serde_json::json!({"type": "subscribe", "have": ["a", 2]}),
            "`subscribe` message, field `have[1]`: invalid type: integer `2`, expected a string",
        ),
        (
            serde_json::json!({"type": "hello", "version": 1}),
            "`hello` message, missing field `role`",
        ),
        (
            serde_json::json!({"type": "hello", "version": 1, "role": "dancer"}),
            "`hello` message, field `role`: unknown variant `dancer`",
        ),
        (
            serde_json::json!({"type": "pose", "avatar": "a", "profile": "canonical", "timestamp": 0.0,
                "joints": [{"name": "pelvis"}, {"name": "spine1", "rotation": [0.0, "x", 0.0, 1.0]}]}),
            "`pose` message, field `joints[1].rotation[1]`: invalid type: string \"x\", expected f32",
        ),
        (
            serde_json::json!({"type": "wear", "garment": "tshirt"}),
            "`wear` message, missing field `avatar`",
        ),
        (
            serde_json::json!({"type": "resync", "avatars": "alice"}),
            "`resync` message, field `avatars`: invalid type: string \"alice\", expected a sequence",
        ),
        (
            serde_json::json!({"type": "calibrate", "avatar": 7}),
            "`calibrate` message, field `avatar`: invalid type: integer `7`, expected a string",
        ),
    ];
    for (message, expected) in cases {
        let (m, j) = (mp(message.clone()), js(message.clone()));
        assert!(m.starts_with("bad MessagePack: "), "{m}");
        assert!(m.contains(expected), "MessagePack {message}: {m}");
        assert!(j.starts_with("bad JSON: "), "{j}");
        assert!(j.contains(expected), "JSON {message}: {j}");
    }
    // no type of ours: serde's error, listing the types
    let unknown = serde_json::json!({"type": "dance"});
    for e in [mp(unknown.clone()), js(unknown)] {
        assert!(
            e.contains("unknown variant `dance`, expected one of"),
            "{e}"
        );
    }
}

#[test]
fn a_resync_names_one_to_max_valid_avatars() {
    let m = ClientMessage::Resync(ResyncMessage {
        avatars: vec!["alice".into(), "kinect-kiosk_2-7".into()],
        assets: vec![],
    });
    let json = serde_json::to_string(&m).expect("json");
    assert_eq!(
        json,
        r#"{"type":"resync","avatars":["alice","kinect-kiosk_2-7"]}"#
    );
    assert_eq!(ClientMessage::from_json(&json).expect("json"), m);
    let bytes = m.to_msgpack().expect("encodes");
    assert_eq!(ClientMessage::from_msgpack(&bytes).expect("msgpack"), m);
    let ClientMessage::Resync(resync) = m else {
        unreachable!()
    };
    assert_eq!(check_resync(&resync, 2), Ok(()));
    let refused = |list: &[&str], max: usize| {
        let avatars: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        let m = ResyncMessage {
            avatars,
            assets: vec![],
        };
        check_resync(&m, max).expect_err("refused")
    };
    assert!(refused(&[], 8).contains("none"));
    // missing assets, with or without avatars
    let with_assets = |avatars: &[&str], assets: Vec<String>| ResyncMessage {
        avatars: avatars.iter().map(|s| s.to_string()).collect(),
        assets,
    };
    let m = ClientMessage::Resync(with_assets(&["alice"], vec!["4845df35".into()]));
    let json = serde_json::to_string(&m).expect("json");
    assert_eq!(
        json,
        r#"{"type":"resync","avatars":["alice"],"assets":["4845df35"]}"#
    );
    assert_eq!(ClientMessage::from_json(&json).expect("json"), m);
    let alone = ClientMessage::from_json(r#"{"type":"resync","assets":["4845df35"]}"#);
    assert_eq!(
        alone.expect("assets alone"),
        ClientMessage::Resync(with_assets(&[], vec!["4845df35".into()]))
    );
    assert_eq!(
        check_resync(&with_assets(&[], vec!["ab".into()]), 8),
        Ok(())
    );
    let too_many = with_assets(&[], (0..=MAX_HAVE).map(|i| i.to_string()).collect());
    assert!(check_resync(&too_many, 8).is_err_and(|e| e.contains("at most 64 assets")));
    let long = with_assets(&["a"], vec!["f".repeat(65)]);
    assert!(check_resync(&long, 8).is_err_and(|e| e.contains("64 characters")));
    assert!(refused(&["a", "b", "c"], 2).contains("at most 2 avatars"));
    assert!(refused(&["a", "\u{1b}[2J"], 8).contains(AVATAR_ID_RULE));
    assert!(refused(&[""], 8).contains(AVATAR_ID_RULE));
}
