//! A deterministic chat generator for benchmarks and tests.

use serde::Serialize;

use crate::commit::format_send_date;

/// A SillyTavern character chat of `messages` messages, the same text for the
/// same `seed`: a header line, then a user (`Traveler`) and a character
/// (`Lyra`) taking turns, a system note every 97 messages, roughly 300 bytes
/// per message line (100,000 messages ≈ 30 MB) with varied words, some
/// multi-line messages, some swipes, `extra.api`/`model` on replies and an
/// ISO `send_date` moving forward. Lines end with `\n`, the last without one,
/// as SillyTavern writes them. For benchmarks and tests: a benchmark writes
/// a big chat with it instead of committing one.
pub fn generate_chat(messages: u32, seed: u64) -> String {
    let mut rng = SplitMix64(seed ^ 0x5eed_c4a7_0000_0001);
    let mut out = String::with_capacity(messages as usize * 310 + 256);
    let header = Header {
        user_name: "Traveler",
        character_name: "Lyra",
        create_date: "2024-05-01@10h12m00s",
        chat_metadata: Metadata {
            note_prompt: "",
            note_interval: 1,
            integrity: format!(
                "{:08x}-{:04x}-4{:03x}-a{:03x}-{:012x}",
                rng.next() as u32,
                rng.next() as u16,
                rng.below(0x1000),
                rng.below(0x1000),
                rng.next() & 0xffff_ffff_ffff
            ),
        },
    };
    push_json(&mut out, &header);

    // 2024-05-01T10:12:00Z, in milliseconds.
    let mut millis: u64 = 1_714_558_320_000;
    for index in 0..messages {
        millis += 20_000 + rng.below(600_000);
        let date =
            format_send_date(std::time::UNIX_EPOCH + std::time::Duration::from_millis(millis));
        out.push('\n');
        if index % 97 == 96 {
            let text = format!("[The scene shifts. {}]", sentence(&mut rng, 10));
            push_json(
                &mut out,
                &Message {
                    name: "SillyTavern System",
                    is_user: false,
                    is_system: true,
                    send_date: &date,
                    mes: &text,
                    swipes: None,
                    swipe_id: None,
                    extra: Extra::default(),
                },
            );
        } else if index % 2 == 0 {
            let words = 14 + rng.below(14) as usize;
            let text = paragraph(&mut rng, words);
            push_json(
                &mut out,
                &Message {
                    name: "Traveler",
                    is_user: true,
                    is_system: false,
                    send_date: &date,
                    mes: &text,
                    swipes: None,
                    swipe_id: None,
                    extra: Extra::default(),
                },
            );
        } else {
            let words = 18 + rng.below(22) as usize;
            let text = paragraph(&mut rng, words);
            let swiped = rng.below(10) == 0;
            let swipes = swiped.then(|| vec![text.clone(), sentence(&mut rng, 8)]);
            push_json(
                &mut out,
                &Message {
                    name: "Lyra",
                    is_user: false,
                    is_system: false,
                    send_date: &date,
                    mes: &text,
                    swipe_id: swiped.then_some(0),
                    swipes,
                    extra: Extra {
                        api: Some("openai"),
                        model: Some(MODELS[rng.below(MODELS.len() as u64) as usize]),
                    },
                },
            );
        }
    }
    out
}

#[derive(Serialize)]
struct Header<'a> {
    user_name: &'a str,
    character_name: &'a str,
    create_date: &'a str,
    chat_metadata: Metadata<'a>,
}

#[derive(Serialize)]
struct Metadata<'a> {
    note_prompt: &'a str,
    note_interval: u32,
    integrity: String,
}

#[derive(Serialize)]
struct Message<'a> {
    name: &'a str,
    is_user: bool,
    is_system: bool,
    send_date: &'a str,
    mes: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    swipes: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    swipe_id: Option<u32>,
    extra: Extra,
}

#[derive(Serialize, Default)]
struct Extra {
    #[serde(skip_serializing_if = "Option::is_none")]
    api: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'static str>,
}

fn push_json<T: Serialize>(out: &mut String, value: &T) {
    // Plain structs of strings, numbers and booleans always serialize.
    if let Ok(json) = serde_json::to_string(value) {
        out.push_str(&json);
    }
}

const MODELS: &[&str] = &[
    "gpt-4o-2024-08-06",
    "claude-3-5-sonnet-20240620",
    "gemini-1.5-pro",
];

const WORDS: &[&str] = &[
    "the",
    "a",
    "lantern",
    "river",
    "old",
    "map",
    "tower",
    "quietly",
    "storm",
    "ember",
    "forest",
    "silver",
    "road",
    "whisper",
    "gate",
    "ancient",
    "dragon",
    "moss",
    "harbor",
    "crown",
    "thief",
    "bridge",
    "ash",
    "wolf",
    "candle",
    "north",
    "market",
    "ruin",
    "spell",
    "blade",
    "oath",
    "mountain",
    "shadow",
    "merchant",
    "library",
    "raven",
    "cold",
    "tide",
    "song",
    "stone",
    "glass",
    "wind",
    "feather",
    "copper",
    "chapel",
    "hollow",
    "vine",
    "scholar",
    "caravan",
    "compass",
    "lighthouse",
    "mist",
    "orchard",
    "sigil",
    "tavern",
    "watchman",
    "rune",
    "cellar",
    "falcon",
    "frost",
    "garden",
    "hearth",
    "island",
    "journal",
    "key",
    "loom",
    "marsh",
    "needle",
    "owl",
    "pilgrim",
    "quarry",
    "rope",
    "saddle",
    "thorn",
    "umbra",
    "valley",
    "wagon",
    "yarrow",
    "zephyr",
    "carefully",
    "slowly",
    "suddenly",
    "never",
    "always",
    "perhaps",
    "beneath",
    "across",
    "toward",
    "behind",
    "within",
    "against",
    "between",
    "remembers",
    "carries",
    "opens",
    "hides",
    "finds",
    "follows",
    "breaks",
    "mends",
    "watches",
    "answers",
    "forgets",
    "burns",
    "sings",
    "waits",
    "bright",
    "hungry",
    "distant",
    "broken",
    "gentle",
    "hidden",
    "restless",
    "patient",
    "crimson",
    "pale",
    "heavy",
    "narrow",
    "wild",
    "sleepy",
    "honest",
    "strange",
    "she",
    "he",
    "they",
    "we",
    "you",
    "I",
    "and",
    "but",
    "so",
    "of",
    "in",
    "on",
    "with",
    "from",
    "under",
    "over",
    "before",
    "after",
    "until",
    "while",
    "because",
];

fn sentence(rng: &mut SplitMix64, words: usize) -> String {
    let mut text = String::new();
    for i in 0..words.max(1) {
        let word = WORDS[rng.below(WORDS.len() as u64) as usize];
        if i == 0 {
            let mut chars = word.chars();
            if let Some(first) = chars.next() {
                text.extend(first.to_uppercase());
                text.push_str(chars.as_str());
            }
        } else {
            text.push(' ');
            text.push_str(word);
        }
    }
    text.push(['.', '.', '.', '!', '?'][rng.below(5) as usize]);
    text
}

fn paragraph(rng: &mut SplitMix64, words: usize) -> String {
    let mut text = String::new();
    let mut left = words;
    while left > 0 {
        let n = (4 + rng.below(9) as usize).min(left);
        left -= n;
        if !text.is_empty() {
            text.push_str(if rng.below(6) == 0 { "\n\n" } else { " " });
        }
        let s = sentence(rng, n);
        if rng.below(5) == 0 {
            text.push('*');
            text.push_str(&s);
            text.push('*');
        } else {
            text.push_str(&s);
        }
    }
    text
}

/// Deterministic, fast, good enough for test text.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound.max(1)
    }
}
