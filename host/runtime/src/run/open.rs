//! Making a run and reopening one: [`Run::at`] (or [`Run::under`]) gives a
//! [`RunBuilder`], which takes the settings — the run id, durability, what
//! the run is bound to, the journal's replica — and then creates the run,
//! opens it again, or resumes its loop. [`Run::create`], [`Run::open`] and
//! [`Run::resume`] are the builder with its defaults.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use toolhost_capabilities::{RunBindings, run_context};
use toolhost_core::{Profile, profile::WORKSPACE_ROOTS};
use toolhost_journal::{
    Durability, Event as _, Recovery, RootSpec, RunDirectory, RunManifest, RunResumed, RunStarted,
    read_events,
};

use super::{ReplicaFactory, Run};
use crate::failure::RunFailure;
use crate::loop_record::{LOOP_RECORD_PATH, LoopRecord};
use crate::resume::{ResumeLog, TERMINAL_EVENTS};

/// Where a run is, or is to be made.
enum Place {
    /// This directory.
    At(PathBuf),
    /// A new directory named by the run's id, in this one.
    Under(PathBuf),
}

/// The settings of a run to make or reopen (see the module).
pub struct RunBuilder {
    place: Place,
    run_id: Option<String>,
    durability: Durability,
    bindings: RunBindings,
    replica: Option<ReplicaFactory>,
}

impl Run {
    /// A run at `root` (for a new run: absent or an empty directory).
    pub fn at(root: &Path) -> RunBuilder {
        RunBuilder::new(Place::At(root.to_owned()))
    }

    /// A new run in a new directory `<runs_dir>/<run-id>`.
    pub fn under(runs_dir: &Path) -> RunBuilder {
        RunBuilder::new(Place::Under(runs_dir.to_owned()))
    }

    /// Create a run at `root` for `profile`, bound to nothing but its own
    /// directory, and journal `run_started`.
    pub fn create(
        root: &Path,
        profile: &Profile,
        durability: Durability,
    ) -> Result<Arc<Self>, RunFailure> {
        Self::at(root).durability(durability).create(profile)
    }

    /// Reopen a run, cutting a torn journal tail, and journal `run_resumed`.
    /// Its chat must still have the frozen prefix it was bound to.
    pub fn open(root: &Path) -> Result<(Arc<Self>, Recovery), RunFailure> {
        Self::at(root).open()
    }

    /// Reopen an interrupted agent run to go on with its loop
    /// ([`crate::run_agent_loop`] with the returned record's settings).
    pub fn resume(root: &Path) -> Result<(Arc<Self>, LoopRecord), RunFailure> {
        Self::at(root).resume()
    }
}

impl RunBuilder {
    fn new(place: Place) -> Self {
        Self {
            place,
            run_id: None,
            durability: Durability::default(),
            bindings: RunBindings::default(),
            replica: None,
        }
    }

    /// A new run's id (default: a fresh one).
    pub fn id(mut self, run_id: &str) -> Self {
        self.run_id = Some(run_id.to_owned());
        self
    }

    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// A new run bound to a chat, a prompt snapshot and skills.
    pub fn bindings(mut self, bindings: &RunBindings) -> Self {
        self.bindings = bindings.clone();
        self
    }

    /// The journal replicated by what `replica` makes, from the first event
    /// this process writes (`run_started`, or `run_resumed`, which in a
    /// cluster fences the run's last owner).
    pub fn replicated(mut self, replica: ReplicaFactory) -> Self {
        self.replica = Some(replica);
        self
    }

    fn root_and_id(&mut self) -> (PathBuf, String) {
        let run_id = self
            .run_id
            .take()
            .unwrap_or_else(toolhost_journal::new_run_id);
        let root = match &self.place {
            Place::At(root) => root.clone(),
            Place::Under(runs_dir) => runs_dir.join(&run_id),
        };
        (root, run_id)
    }

    /// Create the run for `profile` and journal `run_started`.
    pub fn create(mut self, profile: &Profile) -> Result<Arc<Run>, RunFailure> {
        let (root, run_id) = self.root_and_id();
        Run::create_full(
            &root,
            &run_id,
            profile,
            self.durability,
            &self.bindings,
            self.replica,
        )
    }

    /// Reopen the run (`Run::open`): a run whose loop never started goes
    /// on as a new loop. A run is reopened where it is ([`Run::at`]); the
    /// id, durability and bindings of a new run do not apply.
    pub fn open(self) -> Result<(Arc<Run>, Recovery), RunFailure> {
        let root = self.existing()?;
        Run::open_full(&root, self.replica)
    }

    /// Reopen an interrupted agent run to go on with its loop. The run
    /// directory's lock is held from here, so no second process can resume
    /// it at once. Refused when the run ended, or has no `input/loop.json`
    /// (not an agent run, or one made before runs were resumable).
    pub fn resume(self) -> Result<(Arc<Run>, LoopRecord), RunFailure> {
        let root = self.existing()?;
        Run::resume_full(&root, self.replica)
    }

    /// The directory of a run to reopen: only [`Run::at`] names one.
    fn existing(&self) -> Result<PathBuf, RunFailure> {
        match &self.place {
            Place::At(root) => Ok(root.clone()),
            Place::Under(runs_dir) => Err(RunFailure::State(format!(
                "a run is reopened at its own directory (Run::at), not under {}",
                runs_dir.display()
            ))),
        }
    }
}

impl Run {
    fn create_full(
        root: &Path,
        run_id: &str,
        profile: &Profile,
        durability: Durability,
        bindings: &RunBindings,
        replica: Option<ReplicaFactory>,
    ) -> Result<Arc<Self>, RunFailure> {
        let prepared = run_context::load(bindings)?;
        let resolved = profile.to_resolved_json();
        let mut manifest =
            RunManifest::new(run_id, &profile.id, resolved.as_bytes(), roots(profile));
        manifest.inputs = prepared.record.clone();
        let mut dir = RunDirectory::create(root, manifest, resolved.as_bytes(), durability)?;
        if let Some(replica) = replica {
            attach_replica(&mut dir, root, replica)?;
        }
        prepared.store_snapshot(root)?;
        let started = RunStarted::new(dir.manifest());
        let seq = dir.journal_mut().record(&started)?;
        toolhost_core::crash_point::hit_event(seq);
        Ok(Arc::new(Self::wrap(dir, prepared.loaded, profile.clone())?))
    }

    fn open_full(
        root: &Path,
        replica: Option<ReplicaFactory>,
    ) -> Result<(Arc<Self>, Recovery), RunFailure> {
        let (mut dir, recovery) = RunDirectory::open(root)?;
        let loaded = run_context::reload(&dir.manifest().inputs, root)?;
        let profile = Self::load_profile(&dir)?;
        let resumed = RunResumed {
            run_id: dir.manifest().run_id.clone(),
            previous_seq: recovery.last_seq,
            torn_bytes: recovery.torn_bytes,
            resume: None,
        };
        if let Some(replica) = replica {
            attach_replica(&mut dir, root, replica)?;
        }
        dir.journal_mut().record(&resumed)?;
        Ok((Arc::new(Self::wrap(dir, loaded, profile)?), recovery))
    }

    fn resume_full(
        root: &Path,
        replica: Option<ReplicaFactory>,
    ) -> Result<(Arc<Self>, LoopRecord), RunFailure> {
        let (mut dir, recovery) = RunDirectory::open(root)?;
        let events = read_events(dir.layout().journal().absolute)?;
        if let Some(end) = events
            .iter()
            .find(|event| TERMINAL_EVENTS.contains(&event.r#type.as_str()))
        {
            return Err(RunFailure::AlreadyEnded {
                kind: end.r#type.clone(),
                seq: end.seq,
            });
        }
        let record = match dir.read_file(LOOP_RECORD_PATH)? {
            Some(bytes) => LoopRecord::from_json(&bytes)?,
            // Cut off between its creation and its loop's first step:
            // nothing was asked or done yet.
            None if events.iter().all(|event| event.r#type == RunStarted::TYPE) => {
                return Err(RunFailure::NotResumable(format!(
                    "{} was interrupted before its loop started: nothing was done yet, so start the run again",
                    root.display()
                )));
            }
            None => {
                return Err(RunFailure::NotResumable(format!(
                    "{} has no {LOOP_RECORD_PATH}: it is not an agent run, or was made before runs could be resumed",
                    root.display()
                )));
            }
        };
        let loaded = run_context::reload(&dir.manifest().inputs, root)?;
        let profile = Self::load_profile(&dir)?;
        let log = ResumeLog::from_events(&events);
        let resumed = RunResumed {
            run_id: dir.manifest().run_id.clone(),
            previous_seq: recovery.last_seq,
            torn_bytes: recovery.torn_bytes,
            resume: serde_json::to_value(&log.found).ok(),
        };
        if let Some(replica) = replica {
            attach_replica(&mut dir, root, replica)?;
        }
        dir.journal_mut().record(&resumed)?;
        let mut run = Self::wrap(dir, loaded, profile)?;
        run.resume_log = Some(Arc::new(log));
        Ok((Arc::new(run), record))
    }

    /// A reopened run's profile — checked before anything is journalled or
    /// replicated: a reopened run.json (edited, or rebuilt from a cluster)
    /// may not show or open for writing a root its profile does not.
    fn load_profile(dir: &RunDirectory) -> Result<Profile, RunFailure> {
        let resolved = dir.read_resolved_profile()?;
        let profile = std::str::from_utf8(&resolved)
            .map_err(|error| error.to_string())
            .and_then(|text| Profile::from_json(text).map_err(|error| error.to_string()))
            .map_err(|error| {
                RunFailure::State(format!("the run's profile does not load: {error}"))
            })?;
        if dir.manifest().roots != roots(&profile) {
            return Err(RunFailure::State(
                "run.json's workspace roots (what is shown and writable) are not the ones its profile gives"
                    .to_owned(),
            ));
        }
        Ok(profile)
    }
}

/// Give `dir`'s journal the replica `replica` makes for `root`.
fn attach_replica(
    dir: &mut RunDirectory,
    root: &Path,
    replica: ReplicaFactory,
) -> Result<(), RunFailure> {
    let made = replica(root)
        .map_err(|error| RunFailure::State(format!("the journal's replica: {error}")))?;
    dir.journal_mut().set_replica(Some(made))?;
    Ok(())
}

/// The manifest's roots: the whole universe in its fixed order, each shown
/// and made writable as the profile says, then the runtime's `tool-results/`.
fn roots(profile: &Profile) -> Vec<RootSpec> {
    let mut roots = RootSpec::default_universe();
    for root in &mut roots {
        debug_assert!(WORKSPACE_ROOTS.contains(&root.path.as_str()));
        root.visible = profile.workspace.visible_roots.contains(&root.path);
        root.writable = profile.workspace.writable_roots.contains(&root.path);
    }
    roots.push(RootSpec::tool_results());
    roots
}
