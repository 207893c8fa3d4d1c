//! A small breadth-first explorer: every state reachable within a depth
//! bound, each checked against the model's invariants, with the shortest
//! trace to the first violation.
//!
//! Visited states are remembered by a 64-bit hash only, with a parent link
//! for the trace, so that memory grows with the number of states rather than
//! with their size. A hash collision could hide a state (never invent a
//! violation); at the state counts used here its probability is below 1e-8.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

/// A transition system to explore.
pub trait Model {
    /// A state; equal states are explored once.
    type State: Clone + Eq + Hash + Debug;
    /// What moves one state to the next.
    type Event: Clone + Debug;

    /// The initial states.
    fn init(&self) -> Vec<Self::State>;
    /// The events enabled in `s`.
    fn events(&self, s: &Self::State) -> Vec<Self::Event>;
    /// The successor of `s` under `e`, or `None` if `e` changes nothing.
    fn apply(&self, s: &Self::State, e: &Self::Event) -> Option<Self::State>;
    /// The invariants; an error names the rule and says what broke it.
    fn check(&self, s: &Self::State) -> Result<(), Violation>;
    /// An optional check that runs on every state after `check` passed
    /// (e.g. "settles to two voters"); it is more expensive, so it is
    /// separate.
    fn check_settles(&self, _s: &Self::State) -> Result<(), Violation> {
        Ok(())
    }
    /// Labels for interesting things a state shows (e.g. "forced a new
    /// cluster"). The report counts them, so that a test can prove the
    /// exploration reached the paths it claims to check rather than holding
    /// vacuously.
    fn witnesses(&self, _s: &Self::State) -> Vec<&'static str> {
        Vec::new()
    }
}

/// A broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Which rule ("split brain" … "no voter", "liveness").
    pub rule: &'static str,
    /// What happened.
    pub detail: String,
}

/// What the explorer found.
#[derive(Debug, Clone)]
pub struct Report<E, S> {
    /// Distinct states visited.
    pub states: usize,
    /// Transitions taken (including to already-visited states).
    pub transitions: usize,
    /// The deepest level reached.
    pub depth: usize,
    /// Whether some state at the depth bound still had successors.
    pub bounded: bool,
    /// How long it took.
    pub elapsed: Duration,
    /// The first violation, with the events leading to it and the final state.
    pub violation: Option<Counterexample<E, S>>,
    /// How many visited states showed each witness label.
    pub witnessed: BTreeMap<&'static str, usize>,
}

/// A trace to a violation.
#[derive(Debug, Clone)]
pub struct Counterexample<E, S> {
    /// The broken rule.
    pub violation: Violation,
    /// Index of the initial state the trace starts from.
    pub init: usize,
    /// The events, in order.
    pub events: Vec<E>,
    /// The state in which the rule is broken.
    pub state: S,
}

impl<E: Debug, S: Debug> Counterexample<E, S> {
    /// A readable trace.
    pub fn render(&self) -> String {
        let mut out = format!(
            "{}: {}\ntrace from initial state {}:\n",
            self.violation.rule, self.violation.detail, self.init
        );
        for (i, e) in self.events.iter().enumerate() {
            out.push_str(&format!("  {:>2}. {e:?}\n", i + 1));
        }
        out.push_str(&format!("final state:\n{:?}\n", self.state));
        out
    }
}

fn fingerprint<T: Hash>(t: &T) -> u64 {
    let mut h = DefaultHasher::new();
    t.hash(&mut h);
    h.finish()
}

/// Explore every state reachable in at most `max_depth` events.
pub fn explore<M: Model>(model: &M, max_depth: usize) -> Report<M::Event, M::State> {
    let started = Instant::now();
    // Per visited state: its parent's index and the event from it.
    let mut parents: Vec<(usize, Option<M::Event>)> = Vec::new();
    let mut seen: HashMap<u64, usize> = HashMap::new();
    let mut queue: VecDeque<(usize, usize, M::State)> = VecDeque::new();
    let mut report = Report {
        states: 0,
        transitions: 0,
        depth: 0,
        bounded: false,
        elapsed: Duration::ZERO,
        violation: None,
        witnessed: BTreeMap::new(),
    };
    let inits = model.init();
    for s in inits {
        let fp = fingerprint(&s);
        if seen.contains_key(&fp) {
            continue;
        }
        let idx = parents.len();
        parents.push((usize::MAX, None));
        seen.insert(fp, idx);
        queue.push_back((idx, 0, s));
    }
    let trace = |parents: &Vec<(usize, Option<M::Event>)>, mut idx: usize| {
        let mut events = Vec::new();
        while let (p, Some(e)) = &parents[idx] {
            events.push(e.clone());
            idx = *p;
        }
        events.reverse();
        (idx, events)
    };
    while let Some((idx, depth, state)) = queue.pop_front() {
        report.depth = report.depth.max(depth);
        for w in model.witnesses(&state) {
            *report.witnessed.entry(w).or_default() += 1;
        }
        let verdict = model
            .check(&state)
            .and_then(|()| model.check_settles(&state));
        if let Err(violation) = verdict {
            let (root, events) = trace(&parents, idx);
            report.violation = Some(Counterexample {
                violation,
                init: root,
                events,
                state,
            });
            break;
        }
        let events = model.events(&state);
        if depth >= max_depth {
            if !events.is_empty() {
                report.bounded = true;
            }
            continue;
        }
        for e in events {
            let Some(next) = model.apply(&state, &e) else {
                continue;
            };
            report.transitions += 1;
            let fp = fingerprint(&next);
            if seen.contains_key(&fp) {
                continue;
            }
            let nidx = parents.len();
            parents.push((idx, Some(e)));
            seen.insert(fp, nidx);
            queue.push_back((nidx, depth + 1, next));
        }
    }
    report.states = parents.len();
    report.elapsed = started.elapsed();
    report
}
