//! Which code triggered the collections: per stack and per site (the innermost frame), the
//! collections and pause time by generation, folded in the same streaming pass as the rest.
//! Memory is bounded by the trace's interned stacks, not by its length.
use std::collections::HashMap;

use neurogc_trace::{Collection, FrameDef, StackDef, StackStatus};
use serde::Serialize;

/// Per generation 0, 1, 2 and unknown.
const GENS: usize = 4;
/// A coarse log histogram per site for its p99: 4 buckets per doubling from 1 µs (±9%).
const HIST_BUCKETS: usize = 4 * 34;

fn bucket(ns: u64) -> usize {
    let us = (ns as f64 / 1e3).max(1.0);
    ((us.log2() * 4.0) as usize).min(HIST_BUCKETS - 1)
}

fn bucket_ns(b: usize) -> u64 {
    (2f64.powf((b + 1) as f64 / 4.0) * 1e3) as u64
}

fn slot(generation: i8) -> usize {
    match generation {
        0..=2 => generation as usize,
        _ => 3,
    }
}

#[derive(Default, Clone, Copy)]
struct Weights {
    collections: [u64; GENS],
    pause_ns: [u64; GENS],
    /// Net container allocations this stack made, estimated: a young collection starts in the
    /// allocation that took gen0's count past threshold0, so each one stands for threshold0.
    allocations: u64,
}

impl Weights {
    fn add(&mut self, g: usize, ns: u64) {
        self.collections[g] += 1;
        self.pause_ns[g] = self.pause_ns[g].saturating_add(ns);
    }
}

struct SiteAgg {
    w: Weights,
    hist: Vec<u32>,
    /// The longest pause it started: a bucket's upper bound never reads above it.
    max_ns: u64,
    /// Young collections it started with threshold0 known: the allocation estimate's samples.
    sampled: u64,
}

impl SiteAgg {
    fn new() -> SiteAgg {
        SiteAgg { w: Weights::default(), hist: vec![0; HIST_BUCKETS], max_ns: 0, sampled: 0 }
    }

    /// Adds another's collections (the same function at another line).
    fn merge(&mut self, other: &SiteAgg) {
        for g in 0..GENS {
            self.w.collections[g] += other.w.collections[g];
            self.w.pause_ns[g] = self.w.pause_ns[g].saturating_add(other.w.pause_ns[g]);
        }
        self.w.allocations += other.w.allocations;
        self.sampled += other.sampled;
        self.max_ns = self.max_ns.max(other.max_ns);
        for (h, &c) in self.hist.iter_mut().zip(&other.hist) {
            *h += c;
        }
    }
}

/// What `report` reads of stacks while it folds the trace.
#[derive(Default)]
pub struct Stacks {
    frames: HashMap<u32, FrameDef>,
    stacks: HashMap<u32, StackDef>,
    per_stack: HashMap<u32, Weights>,
    /// Keyed by the innermost frame's id; `u32::MAX`: a stack with no Python frame.
    per_site: HashMap<u32, SiteAgg>,
    /// Collections with no stack (a build whose stacks are not read, an older recording).
    pub without: u64,
    pub with: u64,
    /// Each file by the shortest tail of its path that tells it apart from every other file in
    /// the trace (`short_names`), made once the trace is read.
    short: std::cell::OnceCell<HashMap<String, String>>,
}

/// A site: where collections started, with what they cost.
#[derive(Serialize, Clone, Debug)]
pub struct Site {
    pub name: String,
    pub file: String,
    pub line: u32,
    pub collections: [u64; GENS],
    pub pause_ns: [u64; GENS],
    /// p99 of the pauses it started, all generations (±9%, and never above `max_ns`).
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Net container allocations made here, estimated from its young collections (each stands
    /// for the threshold0 then in force); None where none of them was young with threshold0
    /// known (full collections and gc.collect() calls say nothing of allocations).
    pub allocations: Option<u64>,
    /// `file` by the shortest tail of its path that tells it apart from every other file in the
    /// trace, as the page's stacks name it too (--json keeps the whole path).
    #[serde(skip)]
    pub short_file: String,
}

impl Site {
    pub fn total_collections(&self) -> u64 {
        self.collections.iter().sum()
    }
    pub fn total_pause_ns(&self) -> u64 {
        self.pause_ns.iter().sum()
    }
}

fn label(name: &str, file: &str, line: u32) -> String {
    if file.is_empty() { name.to_owned() } else { format!("{name} ({file}:{line})") }
}

/// What `report --folded` weighs each stack by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Weight {
    /// Collections started under the stack.
    Collections,
    /// Nanoseconds of pause they caused.
    Pause,
}

const NO_FRAME: &str = "[no Python frame]";
const TRUNCATED: &str = "[truncated]";

impl Stacks {
    pub fn frame(&mut self, f: &FrameDef) {
        self.frames.insert(f.id, f.clone());
    }

    pub fn stack(&mut self, s: &StackDef) {
        self.stacks.insert(s.id, s.clone());
    }

    /// `threshold0`: the threshold in force (from the last window), for the allocation estimate.
    pub fn collection(&mut self, c: &Collection, threshold0: Option<i64>) {
        let Some(id) = c.stack.filter(|id| self.stacks.contains_key(id)) else {
            self.without += 1;
            return;
        };
        self.with += 1;
        let g = slot(c.r#gen);
        let allocations = if g < 2 { threshold0.and_then(|t| u64::try_from(t).ok()) } else { None };
        let stack = self.per_stack.entry(id).or_default();
        stack.add(g, c.duration_ns);
        stack.allocations += allocations.unwrap_or(0);
        let leaf = self.stacks[&id].frames.first().copied().unwrap_or(u32::MAX);
        let site = self.per_site.entry(leaf).or_insert_with(SiteAgg::new);
        site.w.add(g, c.duration_ns);
        site.w.allocations += allocations.unwrap_or(0);
        site.sampled += u64::from(allocations.is_some());
        site.max_ns = site.max_ns.max(c.duration_ns);
        site.hist[bucket(c.duration_ns)] += 1;
    }

    /// Every file of the trace by its shortest telling tail (`short_names`).
    pub fn short_files(&self) -> &HashMap<String, String> {
        self.short.get_or_init(|| {
            short_names(self.frames.values().map(|f| f.file.as_str()))
                .into_iter()
                .map(|(f, short)| (f.to_owned(), short))
                .collect()
        })
    }

    /// A frame's label with its file by its shortest telling tail: `parso/parser.py:79` and
    /// `python/parser.py:79` are two places, where the file's own name made them look one.
    pub fn short_label(&self, label: &str) -> String {
        let split = label
            .rsplit_once(" (")
            .and_then(|(name, at)| Some((name, at.strip_suffix(')')?.rsplit_once(':')?)));
        match split {
            Some((name, (file, line))) => {
                let file = self.short_files().get(file).map_or(file, String::as_str);
                format!("{name} ({file}:{line})")
            }
            None => label.to_owned(),
        }
    }

    fn name(&self, frame: u32) -> (String, String, u32) {
        match self.frames.get(&frame) {
            Some(f) => (f.name.clone(), f.file.clone(), f.line),
            None if frame == u32::MAX => (NO_FRAME.to_owned(), String::new(), 0),
            None => ("[unknown]".to_owned(), String::new(), 0),
        }
    }

    /// The `n` sites that started the most collections, then by pause time. A site is a
    /// function (its name and file), at the line where most of its collections started: by
    /// line, micrograd's `Value.__init__` was two rows (lines 9 and 10, 922 and 383
    /// collections) and `Value.__add__` two more, which misranked them against functions
    /// that allocate on one line.
    pub fn top_sites(&self, n: usize) -> Vec<Site> {
        let mut by_function: HashMap<(String, String), (SiteAgg, u32, u64)> = HashMap::new();
        for (&frame, agg) in &self.per_site {
            let (name, file, line) = self.name(frame);
            let here = agg.w.collections.iter().sum::<u64>();
            let (sum, best_line, best) =
                by_function.entry((name, file)).or_insert_with(|| (SiteAgg::new(), line, 0));
            sum.merge(agg);
            if (here, std::cmp::Reverse(line)) > (*best, std::cmp::Reverse(*best_line)) {
                (*best_line, *best) = (line, here);
            }
        }
        let mut sites: Vec<Site> = by_function
            .into_iter()
            .map(|((name, file), (agg, line, _))| {
                let total: u64 = agg.hist.iter().map(|&c| u64::from(c)).sum();
                let rank = (total as f64 * 0.99).ceil() as u64;
                let mut seen = 0;
                let p99 = agg.hist.iter().position(|&c| {
                    seen += u64::from(c);
                    seen >= rank.max(1)
                });
                let short_file = self.short_files().get(&file).cloned().unwrap_or_default();
                Site {
                    name,
                    file,
                    short_file,
                    line,
                    collections: agg.w.collections,
                    pause_ns: agg.w.pause_ns,
                    p99_ns: p99.map_or(0, bucket_ns).min(agg.max_ns),
                    max_ns: agg.max_ns,
                    allocations: (agg.sampled > 0).then_some(agg.w.allocations),
                }
            })
            .collect();
        sites.sort_by(|a, b| {
            (b.total_collections(), b.total_pause_ns(), &a.name, &a.file).cmp(&(
                a.total_collections(),
                a.total_pause_ns(),
                &b.name,
                &b.file,
            ))
        });
        sites.truncate(n);
        sites
    }

    /// The innermost frames of stack `id`, innermost first, each "name (file:line)" with the
    /// file by its shortest telling tail (an HTML table's cell); None for a stack not in the
    /// trace.
    pub fn innermost(&self, id: u32, n: usize) -> Option<Vec<String>> {
        let s = self.stacks.get(&id)?;
        Some(
            s.frames
                .iter()
                .take(n)
                .map(|&f| {
                    let (name, file, line) = self.name(f);
                    let file = self.short_files().get(&file).cloned().unwrap_or(file);
                    label(&name, &file, line)
                })
                .collect(),
        )
    }

    /// Frames of stack `id`, outermost first, as flame graphs read them; a stack that was cut
    /// short starts with `[truncated]`.
    fn path(&self, id: u32) -> Vec<String> {
        let s = &self.stacks[&id];
        let mut path = Vec::with_capacity(s.frames.len() + 1);
        if matches!(s.status, StackStatus::Truncated | StackStatus::ReadFailed) {
            path.push(TRUNCATED.to_owned());
        }
        path.extend(s.frames.iter().rev().map(|&f| {
            let (name, file, line) = self.name(f);
            label(&name, &file, line)
        }));
        if path.is_empty() {
            path.push(match s.status {
                StackStatus::NoThread => "[no thread state]".to_owned(),
                _ => NO_FRAME.to_owned(),
            });
        }
        path
    }

    /// Stacks with their weight (collections or pause ns), for the generations in `gens`.
    pub fn weighted(&self, weight: Weight, gens: &[usize]) -> Vec<(Vec<String>, u64)> {
        let mut out: Vec<(Vec<String>, u64)> = self
            .per_stack
            .iter()
            .map(|(&id, w)| {
                let v = gens
                    .iter()
                    .map(|&g| if weight == Weight::Pause { w.pause_ns[g] } else { w.collections[g] });
                (self.path(id), v.sum())
            })
            .filter(|(_, v)| *v > 0)
            .collect();
        out.sort();
        out
    }

    /// Folded stacks (`frame;frame;frame N`), as flamegraph.pl, inferno and speedscope read them.
    pub fn folded(&self, weight: Weight) -> String {
        let mut s = String::new();
        for (path, v) in self.weighted(weight, &[0, 1, 2, 3]) {
            // The folded format separates frames with ';' and ends with a space and the count.
            let frames: Vec<String> = path.iter().map(|f| f.replace(';', ":")).collect();
            s.push_str(&frames.join(";"));
            s.push(' ');
            s.push_str(&v.to_string());
            s.push('\n');
        }
        s
    }
}

/// Each file as the shortest tail of its path that no other file here ends with: the file's
/// own name where that is unique, `python/parser.py` beside `parso/parser.py`.
pub fn short_names<'a>(
    files: impl IntoIterator<Item = &'a str>,
) -> std::collections::HashMap<&'a str, String> {
    let mut files: Vec<&str> = files.into_iter().collect();
    files.sort_unstable();
    files.dedup();
    let parts =
        |f: &str| -> Vec<String> { f.split('/').filter(|p| !p.is_empty()).map(str::to_owned).collect() };
    let all: Vec<Vec<String>> = files.iter().map(|f| parts(f)).collect();
    let tail = |p: &[String], n: usize| p[p.len().saturating_sub(n)..].join("/");
    files
        .iter()
        .zip(&all)
        .map(|(f, p)| {
            let n = (1..=p.len().max(1))
                .find(|&n| {
                    let mine = tail(p, n);
                    all.iter().filter(|q| *q != p).all(|q| !(tail(q, n) == mine && q.len() >= n))
                })
                .unwrap_or(p.len());
            (*f, if p.is_empty() { (*f).to_owned() } else { tail(p, n) })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_by_the_shortest_tail_that_tells_them_apart() {
        let files = ["/venv/parso/parser.py", "/venv/parso/python/parser.py", "/srv/app.py", ""];
        let short = short_names(files);
        assert_eq!(short["/venv/parso/parser.py"], "parso/parser.py");
        assert_eq!(short["/venv/parso/python/parser.py"], "python/parser.py");
        assert_eq!(short["/srv/app.py"], "app.py");
        assert_eq!(short[""], "");
    }

    fn gc(generation: i8, ns: u64, stack: u32) -> Collection {
        Collection {
            ts_ns: 0,
            pid: 1,
            tid: 1,
            r#gen: generation,
            duration_ns: ns,
            collected: 0,
            uncollectable: 0,
            stack: Some(stack),
            running: None,
            halted: None,
        }
    }

    #[test]
    fn sites_and_folded_stacks_weigh_what_each_stack_started() {
        let mut s = Stacks::default();
        for (id, name, line) in [(0, "main", 10), (1, "alpha", 3), (2, "beta", 6)] {
            s.frame(&FrameDef { id, name: name.into(), file: "w.py".into(), line });
        }
        s.stack(&StackDef { id: 0, frames: vec![1, 0], status: StackStatus::Complete });
        s.stack(&StackDef { id: 1, frames: vec![2, 0], status: StackStatus::Truncated });
        for _ in 0..3 {
            s.collection(&gc(0, 20_000, 0), Some(700));
        }
        s.collection(&gc(2, 300_000_000, 1), Some(700));
        s.collection(&Collection { stack: None, ..gc(0, 1, 0) }, None);
        assert_eq!((s.with, s.without), (4, 1));
        let top = s.top_sites(10);
        assert_eq!((top[0].name.as_str(), top[0].line), ("alpha", 3));
        assert_eq!((top[0].collections, top[1].pause_ns[2]), ([3, 0, 0, 0], 300_000_000));
        assert_eq!(
            (top[0].allocations, top[1].allocations),
            (Some(2100), None),
            "gen2 is no allocation sample"
        );
        // The bucket's bound would read 9% above it: a p99 is never above the longest pause.
        assert_eq!((top[1].p99_ns, top[1].max_ns), (300_000_000, 300_000_000));
        assert_eq!(
            s.folded(Weight::Collections),
            "[truncated];main (w.py:10);beta (w.py:6) 1\nmain (w.py:10);alpha (w.py:3) 3\n"
        );
        assert!(s.folded(Weight::Pause).contains("main (w.py:10);alpha (w.py:3) 60000\n"));
    }

    #[test]
    fn a_function_is_one_site_at_the_line_where_most_of_its_collections_started() {
        let mut s = Stacks::default();
        for (id, name, line) in
            [(0, "Value.__init__", 9), (1, "Value.__init__", 10), (2, "Neuron.__call__", 21)]
        {
            s.frame(&FrameDef { id, name: name.into(), file: "/site/micrograd/engine.py".into(), line });
            s.stack(&StackDef { id, frames: vec![id], status: StackStatus::Complete });
        }
        // Line 9 starts 2 collections, line 10 starts 3, Neuron.__call__ 4: by line,
        // Neuron.__call__ came first.
        for (stack, n) in [(0, 2), (1, 3), (2, 4)] {
            for _ in 0..n {
                s.collection(&gc(0, 20_000, stack), Some(700));
            }
        }
        s.collection(&gc(2, 150_000_000, 1), Some(700));
        let top = s.top_sites(10);
        assert_eq!(top.len(), 2);
        assert_eq!(
            (top[0].name.as_str(), top[0].line, top[0].collections),
            ("Value.__init__", 10, [5, 0, 1, 0])
        );
        assert_eq!((top[0].max_ns, top[0].allocations), (150_000_000, Some(3500)));
        assert_eq!((top[1].name.as_str(), top[1].total_collections()), ("Neuron.__call__", 4));
    }
}
