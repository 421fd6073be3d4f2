//! Consecutive chat messages packed for a scan (`chat-read.scan`): all
//! texts in one string with end offsets, speaker names interned. The host
//! packs a batch with it and the guest SDK builds the same shape from single
//! messages, so both sides agree on the layout.

/// Texts and names of consecutive messages; roles are kept by the caller,
/// in its own type, one per [`push`](Self::push).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackedTexts {
    pub texts: String,
    /// Per message, where its text ends in `texts` (bytes).
    pub text_ends: Vec<u32>,
    /// Per message, its name's position in `names`.
    pub name_ids: Vec<u32>,
    /// Each distinct name once, in order of first appearance.
    pub names: Vec<String>,
}

impl PackedTexts {
    /// Room for `messages` messages of `text_bytes` bytes in all.
    pub fn with_capacity(messages: usize, text_bytes: usize) -> Self {
        Self {
            texts: String::with_capacity(text_bytes),
            text_ends: Vec::with_capacity(messages),
            name_ids: Vec::with_capacity(messages),
            names: Vec::new(),
        }
    }

    /// Append one message.
    pub fn push(&mut self, text: &str, name: &str) {
        self.texts.push_str(text);
        // A batch is at most 1,000 messages of a chat file held in memory,
        // far below 4 GiB; saturate rather than wrap if it ever is not.
        self.text_ends
            .push(u32::try_from(self.texts.len()).unwrap_or(u32::MAX));
        // Batches have few speakers: a linear search beats hashing.
        let id = match self.names.iter().position(|known| known == name) {
            Some(id) => id,
            None => {
                self.names.push(name.to_owned());
                self.names.len() - 1
            }
        };
        self.name_ids.push(id as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_concatenated_and_names_interned() {
        let mut pack = PackedTexts::default();
        pack.push("héllo", "Ann");
        pack.push("", "Bo");
        pack.push("龍", "Ann");
        assert_eq!(pack.texts, "héllo龍");
        assert_eq!(pack.text_ends, [6, 6, 9]);
        assert_eq!(pack.name_ids, [0, 1, 0]);
        assert_eq!(pack.names, ["Ann", "Bo"]);
    }
}
