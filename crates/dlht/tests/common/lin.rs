//! A per-key linearizability checker for map histories.
//!
//! A map is linearizable iff each key's sub-history is (linearizability is
//! local), so histories are split by key and each is checked against a
//! sequential single-key register with the map's operations, by the
//! Wing–Gong search with memoization of (linearized set, state) as in
//! Lowe's "Testing for linearizability" (2017).
//!
//! Times are tickets from one shared counter taken just before the call and
//! just after it returns: if A's response ticket is below B's invocation
//! ticket, A really finished before B began.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// An operation on one key, with its observed result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Call {
    Get(Option<u64>),
    Insert(u64, Result<(), u64>),
    Put(u64, Option<u64>),
    Remove(Option<u64>),
    Upsert(u64, Option<u64>),
    /// `update` adding the delta: the new value.
    Update(u64, Option<u64>),
    /// `get_or_insert_with` of the value: the value there after.
    GetOrInsert(u64, u64),
    /// `remove_if` the value equals this one: the value removed.
    RemoveIfEq(u64, Option<u64>),
    /// `compute` with `modes::compute_rule(v)`: what it did.
    Compute(u64, dlht::Computed<u64>),
}

impl Call {
    /// Apply to the sequential state; None if the observed result is
    /// impossible from `state`.
    pub fn step(&self, state: Option<u64>) -> Option<Option<u64>> {
        match *self {
            Call::Get(r) => (r == state).then_some(state),
            Call::Insert(v, r) => match (state, r) {
                (None, Ok(())) => Some(Some(v)),
                (Some(old), Err(e)) if old == e => Some(state),
                _ => None,
            },
            Call::Put(v, r) => (r == state).then(|| state.map(|_| v)),
            Call::Remove(r) => (r == state).then_some(None),
            Call::Upsert(v, r) => (r == state).then_some(Some(v)),
            Call::Update(d, r) => {
                let next = state.map(|x| x.wrapping_add(d));
                (r == next).then_some(next)
            }
            Call::GetOrInsert(v, r) => {
                let next = state.or(Some(v));
                (Some(r) == next).then_some(next)
            }
            Call::RemoveIfEq(v, r) => match state {
                Some(x) if x == v => (r == state).then_some(None),
                _ => r.is_none().then_some(state),
            },
            Call::Compute(v, r) => {
                use dlht::{Computed, Op};
                let want = match (crate::common::modes::compute_rule(v)(state), state) {
                    (Op::Keep, _) | (Op::Remove, None) => Computed::Unchanged(state),
                    (Op::Remove, Some(x)) => Computed::Removed(x),
                    (Op::Upsert(n), None) => Computed::Inserted(n),
                    (Op::Upsert(n), Some(x)) => Computed::Replaced { old: x, new: n },
                };
                (r == want).then_some(want.value())
            }
        }
    }
}

/// One completed operation.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub key: u64,
    pub call: Call,
    pub invoked: u64,
    pub returned: u64,
}

/// A shared clock for tickets.
#[derive(Default)]
pub struct Clock(AtomicU64);

impl Clock {
    pub fn tick(&self) -> u64 {
        self.0.fetch_add(1, Ordering::SeqCst)
    }
}

/// Result of a check.
#[derive(Debug)]
pub enum Verdict {
    Linearizable,
    /// The first key whose history has no linearization, with that history.
    Violation {
        key: u64,
        history: Vec<Event>,
    },
}

/// Check a whole history, given each key's initial value.
pub fn check(events: &[Event], initial: &HashMap<u64, u64>) -> Verdict {
    let mut by_key: HashMap<u64, Vec<Event>> = HashMap::new();
    for e in events {
        by_key.entry(e.key).or_default().push(*e);
    }
    let mut keys: Vec<_> = by_key.keys().copied().collect();
    keys.sort_unstable();
    for k in keys {
        let h = &by_key[&k];
        if !check_key(h, initial.get(&k).copied()) {
            let mut history = h.clone();
            history.sort_by_key(|e| e.invoked);
            return Verdict::Violation { key: k, history };
        }
    }
    Verdict::Linearizable
}

/// Check one key's history from `init`.
pub fn check_key(events: &[Event], init: Option<u64>) -> bool {
    let mut ev: Vec<Event> = events.to_vec();
    ev.sort_by_key(|e| e.invoked);
    let n = ev.len();
    let words = n.div_ceil(64).max(1);
    let mut done = vec![0u64; words];
    let mut seen: HashSet<(Vec<u64>, Option<u64>)> = HashSet::new();
    // Iterative DFS over (linearized set, state). A candidate is any pending
    // op invoked before every pending op's response (it is "minimal").
    let mut stack: Vec<(usize, Option<u64>)> = Vec::new(); // (op taken, state before)
    let mut state = init;
    let mut count = 0usize;
    let mut start_from = 0usize;
    loop {
        if count == n {
            return true;
        }
        let min_ret = (0..n).filter(|&i| !bit(&done, i)).map(|i| ev[i].returned).min().unwrap();
        let mut advanced = false;
        let mut i = start_from;
        while i < n && ev[i].invoked <= min_ret {
            if !bit(&done, i) {
                if let Some(next) = ev[i].call.step(state) {
                    set(&mut done, i, true);
                    if seen.insert((done.clone(), next)) {
                        stack.push((i, state));
                        state = next;
                        count += 1;
                        advanced = true;
                        break;
                    }
                    set(&mut done, i, false);
                }
            }
            i += 1;
        }
        if advanced {
            start_from = 0;
            continue;
        }
        // Backtrack.
        match stack.pop() {
            None => return false,
            Some((i, prev)) => {
                set(&mut done, i, false);
                state = prev;
                count -= 1;
                start_from = i + 1;
            }
        }
    }
}

fn bit(v: &[u64], i: usize) -> bool {
    v[i / 64] >> (i % 64) & 1 == 1
}

fn set(v: &mut [u64], i: usize, on: bool) {
    if on {
        v[i / 64] |= 1 << (i % 64);
    } else {
        v[i / 64] &= !(1 << (i % 64));
    }
}

// The harness that records histories of `Ops` maps, shared by the test files.

/// One recorded operation on `map`.
pub fn record<M: crate::common::Ops + ?Sized>(
    map: &M,
    clock: &Clock,
    rng: &mut crate::common::Rng,
    key: u64,
    values: u64,
) -> Event {
    let v = 1 + rng.below(values);
    let op = rng.below(10);
    let invoked = clock.tick();
    let call = match op {
        0..=2 => Call::Get(map.get(key)),
        3..=4 => Call::Insert(v, map.insert(key, v)),
        5..=6 => Call::Put(v, map.put(key, v)),
        7..=8 => Call::Remove(map.remove(key)),
        _ => Call::Upsert(v, map.upsert(key, v)),
    };
    let returned = clock.tick();
    Event { key, call, invoked, returned }
}

/// Run `threads` workers on `hot` keys (values drawn from 1..=values, a tiny
/// domain so equal-contents reuse — hazard 2 — actually happens), while
/// `fillers` threads insert fresh keys to force resizes. Returns the history.
pub fn run_history<M: crate::common::Ops + Sync + ?Sized>(
    map: &M,
    threads: usize,
    fillers: usize,
    ops: usize,
    hot: u64,
    values: u64,
    seed: u64,
) -> Vec<Event> {
    run_history_with(map, threads, fillers, ops, hot, values, seed, record, |_, _| {})
}

/// One operation recorded by a worker of [`run_history_with`].
pub type Recorder<M> = fn(&M, &Clock, &mut crate::common::Rng, u64, u64) -> Event;

/// Keys a filler inserts between two calls of `after_fill`.
pub const FILL_ROUND: usize = 1000;

/// [`run_history`] with the workers' `record` given, and `after_fill` called
/// by each filler with each round of [`FILL_ROUND`] keys it inserted.
#[allow(clippy::too_many_arguments)]
pub fn run_history_with<M: crate::common::Ops + Sync + ?Sized>(
    map: &M,
    threads: usize,
    fillers: usize,
    ops: usize,
    hot: u64,
    values: u64,
    seed: u64,
    record: Recorder<M>,
    after_fill: impl Fn(&M, &[u64]) + Sync,
) -> Vec<Event> {
    let clock = Clock::default();
    let events = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for t in 0..threads {
            let (clock, events) = (&clock, &events);
            s.spawn(move || {
                let mut rng =
                    crate::common::Rng(seed ^ (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                let mut mine = Vec::with_capacity(ops);
                for _ in 0..ops {
                    let key = rng.below(hot);
                    mine.push(record(map, clock, &mut rng, key, values));
                }
                events.lock().unwrap().extend(mine);
            });
        }
        for f in 0..fillers {
            let after_fill = &after_fill;
            s.spawn(move || {
                let mut round = Vec::with_capacity(FILL_ROUND);
                for i in 0..(ops as u64 * 4) {
                    let k = ((1_000_000 + f as u64) << 32) | i;
                    map.insert(k, i).unwrap();
                    round.push(k);
                    if round.len() == FILL_ROUND {
                        after_fill(map, &round);
                        round.clear();
                    }
                }
            });
        }
    });
    events.into_inner().unwrap()
}

pub fn assert_linearizable(name: &str, events: &[Event]) {
    if let Verdict::Violation { key, history } = check(events, &HashMap::new()) {
        let lines: Vec<String> =
            history.iter().map(|e| format!("  [{:>6},{:>6}] {:?}", e.invoked, e.returned, e.call)).collect();
        panic!("{name}: history of key {key} is not linearizable:\n{}", lines.join("\n"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(call: Call, invoked: u64, returned: u64) -> Event {
        Event { key: 1, call, invoked, returned }
    }

    #[test]
    fn accepts_overlapping_reorderable_ops() {
        // Insert overlaps a get that already sees it: fine.
        let h = [ev(Call::Insert(5, Ok(())), 0, 3), ev(Call::Get(Some(5)), 1, 2)];
        assert!(check_key(&h, None));
    }

    #[test]
    fn rejects_real_time_violation() {
        // The get finished before the insert began but saw its value.
        let h = [ev(Call::Get(Some(5)), 0, 1), ev(Call::Insert(5, Ok(())), 2, 3)];
        assert!(!check_key(&h, None));
    }

    #[test]
    fn rejects_double_insert() {
        let h = [ev(Call::Insert(1, Ok(())), 0, 3), ev(Call::Insert(2, Ok(())), 1, 2)];
        assert!(!check_key(&h, None));
    }
}
