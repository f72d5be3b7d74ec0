//! The page's flame graphs of pause time by Python stack: outermost frame on top, one per
//! generation and one for all, with hover, click-to-zoom and search in a small inline script.
use super::*;
use crate::report::sites::Stacks;

/// A flame graph node: a frame, the weight of every stack through it, and its callees.
#[derive(Default)]
struct FlameNode {
    value: u64,
    children: std::collections::BTreeMap<String, FlameNode>,
}

impl FlameNode {
    fn add(&mut self, path: &[String], v: u64) {
        self.value += v;
        if let Some((first, rest)) = path.split_first() {
            self.children.entry(first.clone()).or_default().add(rest, v);
        }
    }
}

const FLAME_ROW: f64 = 17.0;
/// Frames narrower than this are left out (their time is in their caller's box); those under
/// `FLAME_SHOWN_PX` are there for the zoom, and set no depth (a one-collection start-up stack
/// 30 frames deep made the graph 700 px tall, 400 of them blank).
const FLAME_MIN_PX: f64 = 0.05;
const FLAME_SHOWN_PX: f64 = 0.5;

/// A warm colour per frame name, the same in every graph of the page.
fn flame_color(name: &str) -> String {
    let h = name.bytes().fold(2166136261u32, |h, b| (h ^ u32::from(b)).wrapping_mul(16777619));
    format!("hsl({},{}%,{}%)", 10 + h % 45, 70 + (h >> 8) % 25, 52 + (h >> 16) % 12)
}

/// The frames of `node`'s callees from `x` on, at `depth`; each labelled with its file by the
/// shortest tail of its path that tells it apart (`Stacks::short_label`), its whole path on hover.
fn flame_rows(s: &mut String, stacks: &Stacks, node: &FlameNode, total: u64, x: f64, depth: usize) {
    let mut x = x;
    for (name, child) in &node.children {
        let w = child.value as f64 / total as f64 * W;
        if w >= FLAME_MIN_PX {
            let y = depth as f64 * FLAME_ROW;
            let pct = 100.0 * child.value as f64 / total as f64;
            let short = stacks.short_label(name);
            let _ = write!(
                s,
                r#"<g data-x="{x:.3}" data-w="{w:.3}" data-n="{}"><title>{} — {pct:.1}%</title><rect x="{x:.1}" y="{y:.1}" width="{w:.2}" height="{}" fill="{}" rx="2"/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
                esc(&short),
                esc(name),
                FLAME_ROW - 1.0,
                flame_color(name),
                x + 3.0,
                y + 12.0,
                esc(&fitted(&short, w))
            );
            flame_rows(s, stacks, child, total, x, depth + 1);
        }
        x += w;
    }
}

/// As many characters of `name` as fit in `w` px (about 6.5 px each at 11 px); none under 3.
fn fitted(name: &str, w: f64) -> String {
    let fits = ((w - 6.0) / 6.5).max(0.0) as usize;
    if fits < 3 {
        String::new()
    } else if name.chars().count() > fits {
        name.chars().take(fits - 1).chain(['…']).collect()
    } else {
        name.to_owned()
    }
}

/// How much of the graph's width the frames wide enough to see (`FLAME_SHOWN_PX`) cover, row
/// by row from the outermost.
fn coverage(node: &FlameNode, total: u64, depth: usize, rows: &mut Vec<f64>) {
    for c in node.children.values() {
        let w = c.value as f64 / total as f64;
        if w * W >= FLAME_SHOWN_PX {
            if rows.len() <= depth {
                rows.resize(depth + 1, 0.0);
            }
            rows[depth] += w;
            coverage(c, total, depth + 1, rows);
        }
    }
}

/// The least share of the graph's area its frames cover at first.
const FLAME_FILLED: f64 = 0.8;

/// Rows drawn at first: as many as keep `FLAME_FILLED` of the area covered. A few deep import
/// stacks among shallow ones left half the graph blank; a click on a frame draws its stacks to
/// their depth (`FLAME_SCRIPT`).
/// Returns the rows drawn and the rows there are.
fn flame_depth(node: &FlameNode, total: u64) -> (usize, usize) {
    let mut rows = Vec::new();
    coverage(node, total, 0, &mut rows);
    // A frame's box is a row less the gap under it.
    let boxed = (FLAME_ROW - 1.0) / FLAME_ROW;
    let mut covered = 0.0;
    let mut depth = 1;
    for (d, c) in rows.iter().enumerate() {
        covered += c;
        if covered * boxed / (d + 1) as f64 >= FLAME_FILLED {
            depth = d + 1;
        }
    }
    (depth, rows.len().max(1))
}

/// Click a frame to zoom to it, double-click to zoom out; the search box marks the frames
/// whose name holds what is typed. Each frame's box and label are recomputed from its
/// `data-x`/`data-w` (the graph's own units).
const FLAME_SCRIPT: &str = r#"<script>
for (const svg of document.querySelectorAll('.fg svg')) {
  const W = +svg.dataset.width, H = +svg.dataset.height, ROW = +svg.dataset.row, frames = [...svg.querySelectorAll('g[data-x]')];
  // Labels fit by the font's size as drawn (the page sets it larger in narrow windows).
  const zoom = (x0, w0, whole) => {
    const t0 = frames.length && frames[0].querySelector('text');
    const ch = t0 ? 0.59 * parseFloat(getComputedStyle(t0).fontSize) : 6.5;
    let deepest = 0;
    for (const g of frames) {
      const x = (+g.dataset.x - x0) / w0 * W, w = +g.dataset.w / w0 * W;
      const r = g.querySelector('rect'), t = g.querySelector('text');
      g.style.display = x + w <= 0.01 || x >= W - 0.01 ? 'none' : '';
      r.setAttribute('x', x); r.setAttribute('width', Math.max(w, 0));
      t.setAttribute('x', x + 3);
      const n = g.dataset.n, fits = Math.floor((w - 6) / ch);
      t.textContent = fits < 3 ? '' : n.length > fits ? n.slice(0, fits - 1) + '…' : n;
      if (!g.style.display && w >= 0.5) deepest = Math.max(deepest, +r.getAttribute('y') + ROW);
    }
    // Zoomed in, a frame's stacks are drawn to their depth; zoomed out, as at first.
    svg.setAttribute('viewBox', `0 0 ${W} ${whole ? H : Math.max(deepest, ROW)}`);
  };
  frames.forEach(g => g.addEventListener('click', () => zoom(+g.dataset.x, +g.dataset.w, false)));
  svg.addEventListener('dblclick', () => zoom(0, W, true));
  zoom(0, W, true);
}
for (const box of document.querySelectorAll('.flame input[type=search]')) {
  box.addEventListener('input', () => {
    for (const g of document.querySelectorAll('.fg g[data-n]')) {
      g.classList.toggle('hit', box.value !== '' && g.dataset.n.includes(box.value));
    }
  });
}
</script>"#;

/// Flame graphs of pause time by Python stack (outermost frame on top), one per generation
/// and one for all, switched by radio buttons and CSS; zoom and search by `FLAME_SCRIPT`.
pub(super) fn flame_graphs(s: &mut String, a: &Analysis) {
    let views: [(&str, &str, &[usize]); 4] = [
        ("all", "all generations", &[0, 1, 2, 3]),
        ("g0", "gen0", &[0]),
        ("g1", "gen1", &[1]),
        ("g2", "gen2", &[2]),
    ];
    s.push_str(
        "<h2>Pause time by Python stack</h2><p><small>The stack of the thread that triggered each collection, \
         outermost frame on top, widths in pause time; hover for the share. From 3.12 a collection runs at the \
         next eval-breaker check, so the innermost line may be just after the allocation. Click a frame to zoom, \
         double-click to zoom out.</small></p><div class=\"flame\"><input type=\"search\" placeholder=\"search frames\"> ",
    );
    for (i, (id, label, _)) in views.iter().enumerate() {
        let checked = if i == 0 { " checked" } else { "" };
        let _ = write!(
            s,
            r#"<input type="radio" name="flame" id="fg-{id}"{checked}><label for="fg-{id}">{label}</label> "#
        );
    }
    for (id, label, gens) in views {
        let mut root = FlameNode::default();
        for (path, v) in a.stacks.weighted(crate::report::Weight::Pause, gens) {
            root.add(&path, v);
        }
        let _ = write!(s, r#"<div class="fg fg-{id}">"#);
        if root.value == 0 {
            let _ = write!(s, "<p>No {label} collection with a stack.</p></div>");
            continue;
        }
        let (depth, levels) = flame_depth(&root, root.value);
        let height = depth as f64 * FLAME_ROW;
        if depth < levels {
            let _ = write!(
                s,
                "<p><small>The outer {depth} of {levels} levels, where frames fill most of the width: \
                 click a frame to see the stacks under it.</small></p>"
            );
        }
        let _ = write!(
            s,
            r#"<svg viewBox="0 0 {W} {height}" width="100%" data-width="{W}" data-height="{height}" data-row="{FLAME_ROW}" overflow="hidden" role="img">"#
        );
        flame_rows(s, &a.stacks, &root, root.value, 0.0, 0);
        s.push_str("</svg></div>");
    }
    s.push_str("</div>");
    s.push_str(FLAME_SCRIPT);
}
