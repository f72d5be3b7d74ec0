//! `neurogc-agent top`: the fleet's live view, in the spirit of bpftop and `py-spy top`. One row
//! per Python process, sorted by GC share, longest pause, pause p99 or collections/s, with its
//! full collections' p99 and a history of its GC share; one process's history is drawn large
//! below the rows. ratatui draws on the alternate screen and only sends what changed between
//! frames, so nothing flickers. Fits 80 columns.
use std::{
    io::{self, Stdout},
    sync::{
        Arc,
        atomic::{AtomicU8, Ordering},
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
    layout::{Constraint, Layout},
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
            Sort::Longest => "longest pause",
            Sort::P99 => "pause p99",
            Sort::Rate => "collections/s",
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

pub struct Top<B: Backend> {
    terminal: Terminal<B>,
    /// Index into `Sort::ALL`, changed by the key thread.
    sort: Arc<AtomicU8>,
    /// The process whose history is drawn large: the first row when it was chosen, kept until
    /// it exits, so that the chart does not jump from one process to another.
    charted: Option<i32>,
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
        let keys = Arc::clone(&sort);
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
                    _ => {}
                }
            }
            let _ = quit.send(());
        })?;
        let mut top = Top { terminal, sort, charted: None };
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

fn pause(us: u64) -> String {
    if us == 0 { "-".into() } else { crate::sinks::view::duration(us * 1000) }
}

impl<B: Backend> Top<B> {
    fn draw(&mut self, targets: &[&Target], lost: u64) -> Result<()> {
        let sort = Sort::ALL[self.sort.load(Ordering::Relaxed) as usize % Sort::ALL.len()];
        let mut rows: Vec<&Target> = targets.to_vec();
        rows.sort_by(|a, b| sort.key(b).total_cmp(&sort.key(a)).then(a.who.pid.cmp(&b.who.pid)));
        if !self.charted.is_some_and(|pid| rows.iter().any(|t| t.who.pid == pid)) {
            self.charted = rows.first().map(|t| t.who.pid);
        }
        let charted = rows.iter().find(|t| Some(t.who.pid) == self.charted);
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
                Line::from(format!(
                    "neurogc top · {} Python · {total:.0} coll/s · lost {lost} · by {} (s) · q quits",
                    rows.len(),
                    sort.name()
                ))
                .style(Style::new().add_modifier(Modifier::BOLD)),
                head,
            );
            const WIDTHS: [u16; 8] = [7, 13, 7, 6, 7, 8, 7, 6];
            let history_width = (table.width as usize)
                .saturating_sub(WIDTHS.iter().sum::<u16>() as usize + WIDTHS.len())
                .max(4);
            let body = rows.iter().map(|t| {
                Row::new([
                    Cell::from(t.who.pid.to_string()),
                    Cell::from(t.who.comm.clone()),
                    Cell::from(t.python.clone()),
                    Cell::from(format!("{:.1}", t.stats.gc_share * 100.0)),
                    Cell::from(pause(t.stats.p99_us())),
                    Cell::from(pause(t.stats.full_p99_us())),
                    Cell::from(pause(t.stats.max_us())),
                    Cell::from(format!("{:.0}", t.stats.per_s)),
                    Cell::from(bars(t.stats.history.iter().copied(), history_width)),
                ])
            });
            let header =
                Row::new(["PID", "COMMAND", "PYTHON", "GC %", "P99", "FULL P99", "MAX", "COLL/S", "HISTORY"])
                    .style(Style::new().add_modifier(Modifier::REVERSED));
            let mut widths: Vec<Constraint> = WIDTHS.map(Constraint::Length).to_vec();
            widths.push(Constraint::Min(4));
            f.render_widget(Table::new(body, widths).header(header), table);
            let (title, data): (String, Vec<u64>) = match charted {
                Some(t) => {
                    let peak = t.stats.history.iter().copied().max().unwrap_or(0) as f64 / 10.0;
                    let trigger = t.stats.top_trigger.as_ref().map_or(String::new(), |(site, share)| {
                        format!("· trigger {site} {:.0}% ", share * 100.0)
                    });
                    (
                        format!(" {} {}: GC %/window, peak {peak:.1} {trigger}", t.who.pid, t.who.comm),
                        t.stats.history.iter().copied().collect(),
                    )
                }
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

    fn screen(top: &Top<TestBackend>) -> Vec<String> {
        let buf = top.terminal.backend().buffer();
        (0..buf.area.height)
            .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect::<String>())
            .collect()
    }

    #[test]
    fn rows_sorted_by_the_chosen_key_within_80_columns() {
        let mut top = Top {
            terminal: Terminal::new(TestBackend::new(80, 24)).unwrap(),
            sort: Arc::default(),
            charted: None,
        };
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
        assert!(lines[0].contains("2 Python ·") && lines[0].contains("q quits"), "{}", lines[0]);
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
        let mut top = Top {
            terminal: Terminal::new(TestBackend::new(80, 30)).unwrap(),
            sort: Arc::default(),
            charted: None,
        };
        top.draw(&[&t], 0).unwrap();
        let lines = screen(&top);
        let header = lines.iter().position(|l| l.contains("FULL P99")).expect("a FULL P99 column");
        let row = &lines[header + 1];
        let cells: Vec<&str> = row.split_whitespace().collect();
        // PID COMMAND PYTHON GC% P99 FULL-P99 MAX COLL/S (the histograms keep 2 digits)
        assert_eq!(&cells[..4], &["303", "train", "3.11.7", "30.0"], "{row}");
        assert!(cells[4].ends_with("µs") && cells[5].starts_with("20") && cells[5].ends_with("ms"), "{row}");
        assert_eq!(&cells[6..8], &["200.0ms", "1000"], "{row}");
        // The chart's title sits right under the rows, and it takes the rest of the screen.
        assert!(lines[header + 2].contains("GC %/window, peak 30.0"), "{}", lines.join("\n"));
        assert!(lines.iter().all(|l| l.chars().count() <= 80));
    }

    #[test]
    fn pauses_in_readable_units() {
        assert_eq!(pause(0), "-");
        assert_eq!(pause(85), "85µs");
        assert_eq!(pause(12_500), "12.5ms");
        assert_eq!(pause(2_500_000), "2.50s");
    }
}
