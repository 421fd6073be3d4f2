//! The names a cluster builds subjects and keys from. A tenant, a run id and
//! a node name each become one token of a NATS subject and of a KV key, so
//! each is checked here once: a `.` would add a token, `*`/`>` would make a
//! wildcard, and a space would end the subject.

use std::fmt;

use crate::ClusterError;

/// Longest name accepted as one token.
const MAX_TOKEN: usize = toolhost_journal::layout::MAX_SEGMENT_BYTES;

/// Check that `value` can be one subject token and one KV key part: the
/// run layout's segment rule (`[A-Za-z0-9_-]{1,128}`), which run ids and
/// tenant names already keep.
fn token(what: &'static str, value: &str) -> Result<(), ClusterError> {
    toolhost_journal::layout::check_segment(what, value).map_err(|_| ClusterError::InvalidName {
        what,
        value: value.chars().take(MAX_TOKEN).collect(),
    })
}

/// One run of one tenant: what a lease, a journal subject and a file name
/// are about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RunKey {
    tenant: String,
    run: String,
}

impl RunKey {
    pub fn new(tenant: impl Into<String>, run: impl Into<String>) -> Result<Self, ClusterError> {
        let (tenant, run) = (tenant.into(), run.into());
        token("tenant", &tenant)?;
        token("run id", &run)?;
        Ok(Self { tenant, run })
    }

    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    pub fn run(&self) -> &str {
        &self.run
    }

    /// `<tenant>.<run>`: the tail of the run's subjects and its KV key.
    pub fn path(&self) -> String {
        format!("{}.{}", self.tenant, self.run)
    }

    /// Parse what [`path`](Self::path) made.
    pub fn from_path(path: &str) -> Result<Self, ClusterError> {
        let (tenant, run) = path.split_once('.').ok_or(ClusterError::InvalidName {
            what: "run key",
            value: path.chars().take(MAX_TOKEN).collect(),
        })?;
        Self::new(tenant, run)
    }
}

impl fmt::Display for RunKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.tenant, self.run)
    }
}

/// A node of the cluster, as leases and `toolhost cluster status` name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeName(String);

impl NodeName {
    pub fn new(name: impl Into<String>) -> Result<Self, ClusterError> {
        let name = name.into();
        token("node name", &name)?;
        Ok(Self(name))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_would_change_a_subject_is_refused() {
        for bad in ["", "a.b", "*", ">", "a b", "a\nb", "é", &"x".repeat(129)] {
            assert!(RunKey::new(bad, "run").is_err(), "tenant {bad:?}");
            assert!(RunKey::new("tenant", bad).is_err(), "run {bad:?}");
            assert!(NodeName::new(bad).is_err(), "node {bad:?}");
        }
        let key = RunKey::new("local", "run_0b1c-2").expect("plain names");
        assert_eq!(key.path(), "local.run_0b1c-2");
        assert_eq!(RunKey::from_path(&key.path()).expect("parses"), key);
        assert!(RunKey::from_path("local").is_err());
        assert!(RunKey::from_path("local.a.b").is_err());
    }
}
