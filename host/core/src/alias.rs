//! Model aliases: the names a provider sees. An alias belongs to a snapshot,
//! never to a ToolId; these are the allocation rules that snapshots apply.

/// A builtin's alias: its native name with `.` turned into `_`
/// (`workspace.read_file` → `workspace_read_file`), which every provider's
/// function-name rules accept.
pub fn builtin_alias(native_name: &str) -> String {
    native_name.replace('.', "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_become_underscores() {
        assert_eq!(builtin_alias("workspace.read_file"), "workspace_read_file");
        assert_eq!(builtin_alias("dice.roll"), "dice_roll");
    }
}
