//! Generated chat files: whatever lines a file holds, parsing never panics
//! and either accepts it or names the bad line (`chat.malformed`, a line
//! number within the file); an accepted file has a message per non-header
//! line, each keeping its text. `make fuzz` runs more cases
//! (`PROPTEST_CASES`).

use proptest::prelude::*;
use serde_json::{Value, json};
use toolhost_chat::{ChatError, ChatFile};

/// A line as SillyTavern writes it, or one of the ways it goes wrong.
fn chat_line() -> impl Strategy<Value = String> {
    let text = "\\PC{0,24}";
    prop_oneof![
        4 => (text, any::<bool>(), prop::option::of("[A-Za-z ]{1,8}")).prop_map(|(mes, is_user, name)| {
            let mut message = json!({"mes": mes, "is_user": is_user, "send_date": "March 9, 2024 8:05pm"});
            if let Some(name) = name {
                message["name"] = Value::from(name);
            }
            message.to_string()
        }),
        1 => Just(json!({"user_name": "Ren", "character_name": "Mirelle"}).to_string()),
        1 => Just(String::new()),
        1 => Just("   ".to_owned()),
        1 => "\\PC{0,30}",
        1 => Just("{\"mes\": 3}".to_owned()),
        1 => Just("{\"mes\": \"unterminated".to_owned()),
        1 => Just("[]".to_owned()),
        1 => any::<Vec<u8>>().prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned()),
    ]
}

fn chat_file() -> impl Strategy<Value = (Vec<String>, &'static str, bool)> {
    (
        prop::collection::vec(chat_line(), 0..10),
        prop::sample::select(&["\n", "\r\n"][..]),
        any::<bool>(),
    )
}

proptest! {
    #[test]
    fn any_chat_file_parses_or_names_its_bad_line((lines, newline, with_header) in chat_file()) {
        let mut all = Vec::new();
        if with_header {
            all.push(json!({"user_name": "Ren", "character_name": "Mirelle", "chat_metadata": {}}).to_string());
        }
        all.extend(lines);
        let text = all.join(newline);
        // Generated "lines" may hold line breaks of their own.
        let lines = text.split(['\n', '\r']).count();
        match ChatFile::parse("generated.jsonl", text.into_bytes()) {
            Err(ChatError::Malformed { line, .. }) => {
                prop_assert!(line >= 1 && line <= lines, "line {} of {}", line, lines);
            }
            Err(other) => prop_assert!(false, "unexpected error {}", other),
            Ok(chat) => {
                prop_assert!(chat.messages().len() < lines);
                for message in chat.messages() {
                    let raw: Value = serde_json::from_str(message.raw_line()).expect("a kept line is JSON");
                    prop_assert_eq!(raw["mes"].as_str(), Some(message.text()));
                }
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in any::<Vec<u8>>()) {
        let _ = ChatFile::parse("bytes.jsonl", bytes);
    }
}
