//! The Python stack of every collection, against real interpreters (3.8–3.15, USDT and symbol
//! builds, chroot containers): the code that triggered a collection is the code the workload
//! ran, and a stack comes back whole, with its lines, or says it was truncated.
mod common;

use std::{collections::HashMap, io::Write, process::Child};

use common::*;
use serde_json::Value;

/// The workload's own line numbers, from its `# line: NAME` markers.
fn marked_lines() -> HashMap<String, u64> {
    let src = std::fs::read_to_string(repo_root().join("workloads/tests/triggers.py")).unwrap();
    src.lines()
        .enumerate()
        .filter_map(|(i, l)| Some((l.split("# line: ").nth(1)?.trim().to_owned(), i as u64 + 1)))
        .collect()
}

/// A frame as (name, line).
type Frame = (String, u64);

/// A collection's generation, its stack named (innermost first), and the stack's status.
type Traced = (i64, Vec<Frame>, String);

/// A stream's collections with their stacks named.
struct Stream {
    collections: Vec<Traced>,
    unresolved: usize,
}

fn stream(lines: &[Value]) -> Stream {
    let mut frames: HashMap<u64, Frame> = HashMap::new();
    let mut stacks: HashMap<u64, (Vec<Frame>, String)> = HashMap::new();
    let mut out = Stream { collections: Vec::new(), unresolved: 0 };
    for l in lines {
        match l["type"].as_str() {
            Some("frame") => {
                let name = l["name"].as_str().unwrap().to_owned();
                frames.insert(l["id"].as_u64().unwrap(), (name, l["line"].as_u64().unwrap()));
            }
            Some("stack") => {
                let named =
                    l["frames"].as_array().unwrap().iter().map(|f| frames[&f.as_u64().unwrap()].clone());
                let status = l["status"].as_str().unwrap().to_owned();
                stacks.insert(l["id"].as_u64().unwrap(), (named.collect(), status));
            }
            Some("gc") => match l["stack"].as_u64().and_then(|id| stacks.get(&id)) {
                Some((named, status)) => {
                    out.collections.push((l["gen"].as_i64().unwrap(), named.clone(), status.clone()))
                }
                None => out.unresolved += 1,
            },
            _ => {}
        }
    }
    out
}

/// Runs triggers.py MODE ARG under an attached agent (`--json`), and returns its stream.
fn traced(py: &Python, mode: &str, arg: &str) -> Result<Vec<Value>, String> {
    traced_with_output(py, mode, arg).map(|(lines, _)| lines)
}

/// The same, with the workload's own output lines.
fn traced_with_output(py: &Python, mode: &str, arg: &str) -> Result<(Vec<Value>, Vec<String>), String> {
    let mut target: Child = spawn(&py.script_command("triggers.py", &[mode, arg], true));
    let mut target_out = Lines::new(target.stdout.take().unwrap());
    target_out.wait_for("ready", 30, &py.name);
    let pid = interpreter_pid(&target, py);
    let (mut agent, mut agent_out, _err) = attach_agent(pid, &["--json"], &format!("{}: agent", py.name));
    target.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    target_out.wait_for("done", 60, &py.name);
    let _ = target.wait();
    let status = wait_exit(&mut agent, 30, &format!("{}: agent after the target exited", py.name));
    if !status.success() {
        return Err(format!("{}: agent exited {status}", py.name));
    }
    Ok((json_lines(&agent_out.rest(5)), target_out.seen.clone()))
}

#[test]
fn collections_are_attributed_to_the_code_that_triggered_them() {
    let lines = marked_lines();
    for_each_python(|py| {
        let s = match traced(py, "ratio", "3") {
            Ok(lines) => stream(&lines),
            Err(e) => return vec![e],
        };
        let mut errors = Vec::new();
        // Young collections start in the allocation that crossed threshold0 (3.8–3.11), or at
        // the next eval-breaker check, in the constructor it calls (3.12+).
        let young: Vec<&Vec<Frame>> = s
            .collections
            .iter()
            .filter(|(g, frames, _)| *g < 2 && !frames.is_empty())
            .map(|c| &c.1)
            .collect();
        let leaves = ["alpha", "beta", "Node.__init__", "__init__", "ratio"];
        let caller =
            |frames: &Vec<(String, u64)>| frames.iter().find(|f| f.0 == "alpha" || f.0 == "beta").cloned();
        let from_ratio: Vec<_> = young.iter().filter(|f| f.iter().any(|(n, _)| n == "ratio")).collect();
        // The free-threaded collector runs fewer, longer collections (its threshold grows with
        // the live heap): 3.13t makes about 90 here where GIL builds make thousands.
        if from_ratio.len() < if py.free_threaded { 40 } else { 200 } {
            errors.push(format!("{}: {} young collections under ratio()", py.name, from_ratio.len()));
            return errors;
        }
        let strangers: Vec<&String> =
            from_ratio.iter().map(|f| &f[0].0).filter(|leaf| !leaves.contains(&leaf.as_str())).collect();
        if !strangers.is_empty() {
            errors.push(format!(
                "{}: leaves outside the workload: {:?}",
                py.name,
                &strangers[..strangers.len().min(5)]
            ));
        }
        let alpha = from_ratio.iter().filter(|f| caller(f).is_some_and(|c| c.0 == "alpha")).count();
        let beta = from_ratio.iter().filter(|f| caller(f).is_some_and(|c| c.0 == "beta")).count();
        let share = 100.0 * alpha as f64 / (alpha + beta).max(1) as f64;
        // 5 points, or three standard deviations of a 75% share over this few collections.
        let n = (alpha + beta).max(1) as f64;
        let tolerance = (300.0 * (0.75 * 0.25 / n).sqrt()).max(5.0);
        if (alpha + beta) * 10 < from_ratio.len() * 9 || (share - 75.0).abs() > tolerance {
            errors.push(format!(
                "{}: alpha {alpha}, beta {beta} of {} collections ({share:.1}% alpha, expected 75 ± {tolerance:.1})",
                py.name,
                from_ratio.len()
            ));
        }
        // The allocating line, where the leaf is the allocating function (3.8–3.11).
        let wrong_line =
            from_ratio.iter().filter_map(|f| caller(f)).find(|(name, line)| *line != lines[name.as_str()]);
        if let Some((name, line)) = wrong_line {
            errors.push(format!("{}: {name} placed at line {line}, not {}", py.name, lines[name.as_str()]));
        }
        errors
    });
}

#[test]
fn a_collection_in_a_functions_prologue_is_placed_at_its_def_line() {
    // closure() makes its cell before its first line (3.11+: MAKE_CELL, with no line of its
    // own); a collection triggered there was placed at line 0, a second row for one function.
    let lines = marked_lines();
    let allowed = [lines["closure-def"], lines["closure-def"] + 1, lines["closure-body"]];
    for_each_python(|py| {
        let s = match traced(py, "cells", "2") {
            Ok(lines) => stream(&lines),
            Err(e) => return vec![e],
        };
        let placed: Vec<u64> = s
            .collections
            .iter()
            .filter_map(|(_, frames, _)| frames.iter().find(|f| f.0 == "closure").map(|f| f.1))
            .collect();
        if placed.is_empty() {
            return vec![format!("{}: no collection under closure()", py.name)];
        }
        match placed.iter().find(|l| !allowed.contains(l)) {
            Some(l) => vec![format!("{}: closure() placed at line {l}, not one of {allowed:?}", py.name)],
            None => Vec::new(),
        }
    });
}

#[test]
fn a_stack_comes_back_whole_with_its_lines_or_says_it_was_truncated() {
    let lines = marked_lines();
    for_each_python(|py| {
        let mut errors = Vec::new();
        for (depth, want_status) in [(50, "complete"), (500, "truncated")] {
            let s = match traced(py, "depth", &depth.to_string()) {
                Ok(lines) => stream(&lines),
                Err(e) => return vec![e],
            };
            let Some((_, frames, status)) =
                s.collections.iter().find(|(g, f, _)| *g == 2 && f.first().is_some_and(|f| f.0 == "deep"))
            else {
                errors.push(format!("{}: depth {depth}: no gen2 collection from deep()", py.name));
                continue;
            };
            let mut want: Vec<Frame> = vec![("deep".into(), lines["collect"])];
            want.extend((0..depth).map(|_| ("deep".to_owned(), lines["recurse"])));
            want.push(("main".into(), lines["main"]));
            if want_status == "truncated" {
                want.truncate(64);
            }
            if status != want_status
                || frames[..want.len().min(frames.len())] != want[..]
                || frames.len() < want.len()
            {
                errors.push(format!(
                    "{}: depth {depth}: {status} stack of {} frames, innermost {:?}, outermost {:?}",
                    py.name,
                    frames.len(),
                    &frames[..frames.len().min(2)],
                    frames.last()
                ));
            }
        }
        errors
    });
}

#[test]
fn a_code_object_replaced_at_the_same_address_is_named_anew() {
    // Functions made one after another reuse their predecessor's code object address: each
    // phase's collections must carry its own name, not the first one's.
    let mut errors = Vec::new();
    for name in ["debian-bookworm-3.11", "debian-sid-3.15"] {
        let py = python(name);
        let (lines, out) = match traced_with_output(&py, "reuse", "3") {
            Ok(v) => v,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        let addresses: Vec<&str> = out.iter().filter_map(|l| l.strip_prefix("code ")).collect();
        let shared = addresses.windows(2).any(|w| w[0] == w[1]);
        let s = stream(&lines);
        let mut phases: Vec<String> = Vec::new();
        for (_, frames, _) in &s.collections {
            if let Some((phase, _)) = frames.iter().find(|f| f.0.starts_with("phase_"))
                && phases.last() != Some(phase)
            {
                phases.push(phase.clone());
            }
        }
        if !shared {
            errors.push(format!(
                "{name}: the code objects did not share an address ({addresses:?}): not exercised"
            ));
        }
        if phases != ["phase_0", "phase_1", "phase_2"] {
            errors.push(format!("{name}: collections named {phases:?} in order, code at {addresses:?}"));
        }
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}
