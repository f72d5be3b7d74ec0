//! `neurogc-agent top`: the fleet's live view, in the spirit of bpftop and `py-spy top`. One row
//! per Python process, sorted by GC share, longest pause, pause p99 or collections/s (s cycles),
//! with its full collections' p99 and a history of its GC share; the history of the process
//! chosen with ↑/↓ is drawn large below the rows. Rows keep their places until another's key
//! passes theirs by a margin. ratatui draws on the alternate screen and only sends what changed
//! between frames, so nothing flickers. Fits 80 columns.
use std::{
    io::{self, Stdout},
    sync::{
        Arc,
        atomic::{AtomicI32, AtomicU8, Ordering},
    },
};

use anyhow::{Context, Result};
use crossterm::{
    event::{self, Event, KeyCode, KeyEventKind, KeyModifiers},
    execute,
    terminal::{EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode},
};
use ratatui::{
    Terminal,
    backend::{Backend, CrosstermBackend},
    layout::{Alignment, Constraint, Layout},
    style::{Modifier, Style},
    text::Line,
    widgets::{Block, Borders, Cell, Row, Sparkline, Table},
};
use tokio::sync::mpsc;

use crate::fleet::{Sink, Target};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    Share,
    Longest,
    P99,
    Rate,
}

/// Windows the GC-share sort averages over.
const SORT_WINDOWS: usize = 10;

impl Sort {
    const ALL: [Sort; 4] = [Sort::Share, Sort::Longest, Sort::P99, Sort::Rate];

    fn name(self) -> &'static str {
        match self {
            Sort::Share => "GC share",
            Sort::Longest => "longest",
            Sort::P99 => "p99",
            Sort::Rate => "coll/s",
        }
    }

    fn key(self, t: &Target) -> f64 {
        match self {
            // Over the last windows, not the last one: rows that trade places every second
            // cannot be read.
            Sort::Share => t.stats.recent_share(SORT_WINDOWS),
            Sort::Longest => t.stats.max_us() as f64,
            Sort::P99 => t.stats.p99_us() as f64,
            Sort::Rate => t.stats.per_s,
        }
    }
}

/// How far a row's key must pass the one above it to take its place: rows that traded places
/// on every refresh (two services a tenth of a point of GC share apart) could not be read.
const OVERTAKE: f64 = 1.25;

pub struct Top<B: Backend> {
    terminal: Terminal<B>,
    /// Index into `Sort::ALL`, changed by the key thread.
    sort: Arc<AtomicU8>,
    /// Rows to move the chart by (↑ -1, ↓ +1), added up by the key thread until drawn.
    moves: Arc<AtomicI32>,
    /// The process whose history is drawn large: the first row until ↑/↓ chooses another, kept
    /// until it exits, so that the chart does not jump from one process to another.
    charted: Option<i32>,
    /// The rows' order as last drawn (pids), and the sort it was made by.
    order: (Vec<i32>, Option<Sort>),
}

impl Top<CrosstermBackend<Stdout>> {
    /// Takes over the terminal; `quit` is told when q, Esc or Ctrl-C is pressed.
    pub fn start(sort: Sort, quit: mpsc::UnboundedSender<()>) -> Result<Self> {
        anyhow::ensure!(
            io::IsTerminal::is_terminal(&io::stdout()),
            crate::error::UserError(
                "top draws on a terminal: run it in one (for scripts use `fleet --metrics-addr`)".into()
            )
        );
        enable_raw_mode().context("switching the terminal to raw mode")?;
        execute!(io::stdout(), EnterAlternateScreen)?;
        let terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
        let sort = Arc::new(AtomicU8::new(Sort::ALL.iter().position(|s| *s == sort).unwrap_or(0) as u8));
        let moves = Arc::new(AtomicI32::new(0));
        let (keys, moved) = (Arc::clone(&sort), Arc::clone(&moves));
        std::thread::Builder::new().name("keys".into()).spawn(move || {
            while let Ok(ev) = event::read() {
                let Event::Key(k) = ev else { continue };
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => break,
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => break,
                    KeyCode::Char('s') => {
                        let next = (keys.load(Ordering::Relaxed) + 1) % Sort::ALL.len() as u8;
                        keys.store(next, Ordering::Relaxed);
                    }
                    KeyCode::Up | KeyCode::Char('k') => {
                        moved.fetch_sub(1, Ordering::Relaxed);
                    }
                    KeyCode::Down | KeyCode::Char('j') => {
                        moved.fetch_add(1, Ordering::Relaxed);
                    }
                    _ => {}
                }
            }
            let _ = quit.send(());
        })?;
        let mut top = Top { terminal, sort, moves, charted: None, order: (Vec::new(), None) };
        top.draw(&[], 0)?;
        Ok(top)
    }
}

impl<B: Backend> Drop for Top<B> {
    fn drop(&mut self) {
        let _ = disable_raw_mode();
        let _ = execute!(io::stdout(), LeaveAlternateScreen);
        let _ = self.terminal.show_cursor();
    }
}

const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The last `width` values as bars, scaled to the largest of them.
fn bars(history: impl DoubleEndedIterator<Item = u64> + ExactSizeIterator, width: usize) -> String {
    let last: Vec<u64> = history.rev().take(width).collect();
    let top = last.iter().copied().max().unwrap_or(0).max(1);
    last.iter().rev().map(|&v| if v == 0 { ' ' } else { BARS[((v * 7) / top) as usize] }).collect()
}

/// The rows in the order last drawn (new processes after), each moved up past the ones above
/// it whose key its own passes by `OVERTAKE`; by the key alone where the sort changed.
fn ordered<'a>(targets: &[&'a Target], sort: Sort, last: &(Vec<i32>, Option<Sort>)) -> Vec<&'a Target> {
    let mut rows: Vec<&Target> = targets.to_vec();
    let by_key =
        |a: &&Target, b: &&Target| sort.key(b).total_cmp(&sort.key(a)).then(a.who.pid.cmp(&b.who.pid));
    if last.1 != Some(sort) {
        rows.sort_by(by_key);
        return rows;
    }
    let place = |t: &&Target| last.0.iter().position(|&p| p == t.who.pid).unwrap_or(usize::MAX);
    rows.sort_by(|a, b| place(a).cmp(&place(b)).then(by_key(a, b)));
    // Insertion by a margin (not a total order, so not `sort_by`'s comparator).
    for i in 1..rows.len() {
        let mut j = i;
        while j > 0 && sort.key(rows[j]) > sort.key(rows[j - 1]) * OVERTAKE + 1e-9 {
            rows.swap(j, j - 1);
            j -= 1;
        }
    }
    rows
}

/// The chart's title in `width` columns: the trigger's place goes first, then the trigger (a
/// title cut by the border read "(demo_service.").
fn chart_title(t: &Target, width: usize) -> String {
    let peak = t.stats.history.iter().copied().max().unwrap_or(0) as f64 / 10.0;
    let head = format!(" {} {}: GC %/window, peak {peak:.1} ", t.who.pid, t.who.comm);
    let fits = |s: &String| s.chars().count() <= width;
    let Some((site, share)) = &t.stats.top_trigger else { return head };
    let share = format!("{:.0}%", share * 100.0);
    let full = format!("{head}· trigger {site} {share} ");
    if fits(&full) {
        return full;
    }
    let function = site.rsplit_once(" (").map_or(site.as_str(), |(f, _)| f);
    let short = format!("{head}· trigger {function} {share} ");
    if fits(&short) { short } else { head }
}

/// A number's cell, right-aligned: in columns a place wider than the widest value ("200.0 ms"),
/// two values never read as one.
fn right(s: String) -> Cell<'static> {
    Cell::from(Line::from(s).alignment(Alignment::Right))
}

fn pause(us: u64) -> String {
    if us == 0 { "-".into() } else { crate::sinks::view::duration(us * 1000) }
}

impl<B: Backend> Top<B> {
    fn draw(&mut self, targets: &[&Target], lost: u64) -> Result<()> {
        let sort = Sort::ALL[self.sort.load(Ordering::Relaxed) as usize % Sort::ALL.len()];
        let rows = ordered(targets, sort, &self.order);
        self.order = (rows.iter().map(|t| t.who.pid).collect(), Some(sort));
        let at = rows.iter().position(|t| Some(t.who.pid) == self.charted).unwrap_or(0);
        let moved = self.moves.swap(0, Ordering::Relaxed) as isize;
        let at = (at as isize + moved).clamp(0, rows.len().saturating_sub(1) as isize) as usize;
        self.charted = rows.get(at).map(|t| t.who.pid);
        let charted = rows.get(at);
        self.terminal.draw(|f| {
            // The rows take what they need (one each, and the header); the chart the rest.
            let wanted = rows.len().max(1) as u16 + 1;
            let room = f.area().height.saturating_sub(1 + CHART_MIN);
            let [head, table, chart] = Layout::vertical([
                Constraint::Length(1),
                Constraint::Length(wanted.min(room.max(2))),
                Constraint::Min(CHART_MIN),
            ])
            .areas(f.area());
            let total = rows.iter().map(|t| t.stats.per_s).fold(0.0, |a, b| a + b);
            f.render_widget(
                Line::from(header(rows.len(), total, lost, sort, head.width as usize))
                    .style(Style::new().add_modifier(Modifier::BOLD)),
                head,
            );
            const WIDTHS: [u16; 8] = [7, 12, 7, 6, 9, 9, 9, 6];
            let history_width = (table.width as usize)
                .saturating_sub(WIDTHS.iter().sum::<u16>() as usize + WIDTHS.len())
                .max(4);
            let body = rows.iter().map(|t| {
                let style = if Some(t.who.pid) == self.charted {
                    Style::new().add_modifier(Modifier::BOLD)
                } else {
                    Style::new()
                };
                Row::new([
                    Cell::from(t.who.pid.to_string()),
                    Cell::from(t.who.comm.clone()),
                    Cell::from(t.python.clone()),
                    right(format!("{:.1}", t.stats.gc_share * 100.0)),
                    right(pause(t.stats.p99_us())),
                    right(pause(t.stats.full_p99_us())),
                    right(pause(t.stats.max_us())),
                    right(format!("{:.0}", t.stats.per_s)),
                    Cell::from(bars(t.stats.history.iter().copied(), history_width)),
                ])
                .style(style)
            });
            let header = Row::new([
                Cell::from("PID"),
                Cell::from("COMMAND"),
                Cell::from("PYTHON"),
                right("GC %".into()),
                right("P99".into()),
                right("FULL P99".into()),
                right("MAX".into()),
                right("COLL/S".into()),
                Cell::from("HISTORY"),
            ])
            .style(Style::new().add_modifier(Modifier::REVERSED));
            let mut widths: Vec<Constraint> = WIDTHS.map(Constraint::Length).to_vec();
            widths.push(Constraint::Min(4));
            f.render_widget(Table::new(body, widths).header(header), table);
            let (title, data): (String, Vec<u64>) = match charted {
                Some(t) => (chart_title(t, chart.width as usize), t.stats.history.iter().copied().collect()),
                None => (" no Python process observed yet ".into(), Vec::new()),
            };
            let start = data.len().saturating_sub(chart.width.saturating_sub(2) as usize);
            f.render_widget(
                Sparkline::default()
                    .block(Block::new().borders(Borders::TOP).title(title))
                    .data(&data[start..]),
                chart,
            );
        })?;
        Ok(())
    }
}

/// The first line: what is shown, and the keys, as many as fit.
fn header(processes: usize, per_s: f64, lost: u64, sort: Sort, width: usize) -> String {
    let mut line = format!("neurogc top · {processes} Python · {per_s:.0} coll/s");
    if lost > 0 {
        line.push_str(&format!(" · lost {lost}"));
    }
    line.push_str(&format!(" · by {}", sort.name()));
    for keys in [" · s sort · ↑↓ chart · q quit", " · s sort · q quit", " · q quit"] {
        if line.chars().count() + keys.chars().count() <= width {
            line.push_str(keys);
            break;
        }
    }
    line
}

/// The chart's least height: its title and five rows of bars.
const CHART_MIN: u16 = 6;

impl<B: Backend> Sink for Top<B> {
    fn window(&mut self, targets: &[&Target], lost: u64) -> Result<()> {
        self.draw(targets, lost)
    }
}

#[cfg(test)]
mod tests {
    use ratatui::backend::TestBackend;

    use super::*;
    use crate::fleet::{discover::Identity, stats::Stats};

    fn target(pid: i32, comm: &str, share: f64, per_s: f64) -> Target {
        let mut stats = Stats::default();
        stats.gc_share = share;
        stats.per_s = per_s;
        stats.history.extend([0, 10, 50, 100, (share * 1000.0) as u64]);
        Target {
            who: Identity { pid, comm: comm.into(), ..Default::default() },
            python: "3.11.7".into(),
            stats,
        }
    }

    fn top(height: u16) -> Top<TestBackend> {
        Top {
            terminal: Terminal::new(TestBackend::new(80, height)).unwrap(),
            sort: Arc::default(),
            moves: Arc::default(),
            charted: None,
            order: (Vec::new(), None),
        }
    }

    fn screen(top: &Top<TestBackend>) -> Vec<String> {
        let buf = top.terminal.backend().buffer();
        (0..buf.area.height)
            .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect::<String>())
            .collect()
    }

    #[test]
    fn rows_sorted_by_the_chosen_key_within_80_columns() {
        let mut top = top(24);
        let (a, mut b) = (target(101, "worker-a", 0.05, 900.0), target(202, "worker-b", 0.20, 10.0));
        b.stats.top_trigger = Some(("Cache.put (cache.py:88)".into(), 0.76));
        top.draw(&[&a, &b], 0).unwrap();
        let lines = screen(&top);
        // The first row's top trigger titles its chart.
        assert!(
            lines.iter().any(|l| l.contains("trigger Cache.put (cache.py:88) 76%")),
            "{}",
            lines.join("\n")
        );
        let row = |pid: &str| lines.iter().position(|l| l.trim_start().starts_with(pid)).unwrap();
        assert!(row("202") < row("101"), "GC share sorts 202 first:\n{}", lines.join("\n"));
        assert!(lines[0].contains("2 Python ·") && lines[0].contains("q quit"), "{}", lines[0]);
        assert!(lines.iter().any(|l| l.contains(" 20.0 ")));
        assert!(lines.iter().any(|l| l.contains('█')), "a history is drawn");
        top.sort.store(3, Ordering::Relaxed);
        top.draw(&[&a, &b], 0).unwrap();
        let lines = screen(&top);
        let row = |pid: &str| lines.iter().position(|l| l.trim_start().starts_with(pid)).unwrap();
        assert!(row("101") < row("202"), "collections/s sorts 101 first");
        // The chart stays with the process it showed.
        assert!(lines.iter().any(|l| l.contains(" 202 worker-b: GC %/window")), "{}", lines.join("\n"));
    }

    #[test]
    fn full_collections_show_in_their_own_columns_and_the_chart_fills_the_screen() {
        // A training loop's picture: a thousand 50 µs young collections a second and now and
        // then a 200 ms full one. The all-generation p99 cannot see the full ones.
        let mut t = target(303, "train", 0.3, 1000.0);
        let gc = |r#gen: i8, duration_ns: u64| crate::fleet::stats::collection(r#gen, 0, duration_ns);
        for i in 0..1000 {
            t.stats.record(&gc(
                if i % 200 == 199 { 2 } else { 0 },
                if i % 200 == 199 { 200_000_000 } else { 50_000 },
            ));
        }
        let mut top = top(30);
        top.draw(&[&t], 0).unwrap();
        let lines = screen(&top);
        let header = lines.iter().position(|l| l.contains("FULL P99")).expect("a FULL P99 column");
        let row = &lines[header + 1];
        // Cells two spaces apart at least: a value and its unit are one.
        let cells: Vec<&str> = row.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        // PID COMMAND PYTHON GC% P99 FULL-P99 MAX COLL/S (the histograms keep 2 digits)
        assert_eq!(&cells[..4], &["303", "train", "3.11.7", "30.0"], "{row}");
        assert!(
            cells[4].ends_with(" µs") && cells[5].starts_with("20") && cells[5].ends_with(" ms"),
            "{row}"
        );
        assert_eq!(&cells[6..8], &["200.0 ms", "1000"], "{row}");
        // The chart's title sits right under the rows, and it takes the rest of the screen.
        assert!(lines[header + 2].contains("GC %/window, peak 30.0"), "{}", lines.join("\n"));
        assert!(lines.iter().all(|l| l.chars().count() <= 80));
    }

    #[test]
    fn rows_keep_their_places_and_arrows_choose_the_chart() {
        let mut top = top(24);
        let (mut a, mut b, c) = (
            target(101, "api", 0.100, 50.0),
            target(202, "worker", 0.095, 50.0),
            target(303, "batch", 0.010, 50.0),
        );
        let order = |top: &Top<TestBackend>| -> Vec<usize> {
            let lines = screen(top);
            ["101", "202", "303"]
                .map(|p| lines.iter().position(|l| l.trim_start().starts_with(p)).unwrap())
                .to_vec()
        };
        top.draw(&[&a, &b, &c], 0).unwrap();
        let first = order(&top);
        assert!(first[0] < first[1] && first[1] < first[2]);
        // The GC share sorted by, as the last windows read it.
        let share = |t: &mut Target, v: f64| {
            t.stats.gc_share = v;
            t.stats.history = [(v * 1000.0) as u64].into();
        };
        // Half a point apart, the two trade keys: the rows stay where they were (they
        // re-sorted on every refresh).
        for _ in 0..3 {
            share(&mut a, 0.095);
            share(&mut b, 0.100);
            top.draw(&[&a, &b, &c], 0).unwrap();
            assert_eq!(order(&top), first);
            share(&mut a, 0.100);
            share(&mut b, 0.095);
            top.draw(&[&a, &b, &c], 0).unwrap();
            assert_eq!(order(&top), first);
        }
        // One that passes another by far takes its place.
        share(&mut b, 0.3);
        top.draw(&[&a, &b, &c], 0).unwrap();
        let now = order(&top);
        assert!(now[1] < now[0], "202 went first");
        // ↓ twice charts the third row; ↓ again stays there; ↑ goes back one.
        let charted = |top: &Top<TestBackend>| {
            screen(top).iter().find(|l| l.contains("GC %/window")).cloned().unwrap_or_default()
        };
        assert!(charted(&top).contains(" 101 api:"), "{}", charted(&top));
        top.moves.store(3, Ordering::Relaxed);
        top.draw(&[&a, &b, &c], 0).unwrap();
        assert!(charted(&top).contains(" 303 batch:"), "{}", charted(&top));
        top.moves.store(-1, Ordering::Relaxed);
        top.draw(&[&a, &b, &c], 0).unwrap();
        assert!(charted(&top).contains(" 101 api:"), "{}", charted(&top));
        // The header names the keys.
        assert!(screen(&top)[0].contains("↑↓ chart"), "{}", screen(&top)[0]);
    }

    #[test]
    fn the_charts_title_fits_without_cutting_a_name() {
        let mut t = target(4242, "python3", 0.2, 100.0);
        t.stats.top_trigger = Some(("Service.handle_request (demo_service.py:118)".into(), 0.81));
        let mut top = top(24);
        top.draw(&[&t], 0).unwrap();
        let title = screen(&top).into_iter().find(|l| l.contains("GC %/window")).unwrap();
        assert!(title.contains("trigger Service.handle_request 81%"), "{title}");
        assert!(!title.contains("(demo_service."), "{title}");
        // Where it fits, the place stays.
        t.stats.top_trigger = Some(("put (c.py:8)".into(), 0.5));
        top.draw(&[&t], 0).unwrap();
        let title = screen(&top).into_iter().find(|l| l.contains("GC %/window")).unwrap();
        assert!(title.contains("trigger put (c.py:8) 50%"), "{title}");
    }

    #[test]
    fn pauses_in_readable_units() {
        assert_eq!(pause(0), "-");
        assert_eq!(pause(85), "85 µs");
        assert_eq!(pause(12_500), "12.5 ms");
        assert_eq!(pause(2_500_000), "2.50 s");
    }
}
