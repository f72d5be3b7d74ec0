//! Text for people at a terminal: counted nouns, and lines that fit 80 columns by breaking
//! between fields or words, never inside one.

/// The width every human line is fitted to: a terminal's default, and what fits a log viewer.
pub const WIDTH: usize = 80;

/// "1 window", "3 windows", "1 process", "2 processes", "2 policies".
pub fn plural(n: u64, noun: &str) -> String {
    if n == 1 {
        return format!("1 {noun}");
    }
    let ends = |s: &str| noun.ends_with(s);
    let consonant_y = ends("y") && !noun[..noun.len() - 1].ends_with(['a', 'e', 'i', 'o', 'u']);
    if ends("s") || ends("x") || ends("ch") || ends("sh") {
        format!("{n} {noun}es")
    } else if consonant_y {
        format!("{n} {}ies", &noun[..noun.len() - 1])
    } else {
        format!("{n} {noun}s")
    }
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// Fields joined by `sep`, broken into lines of at most WIDTH characters between fields; lines
/// after the first start with `indent` spaces. A field too long for a line of its own is broken
/// between words. No line ends in spaces.
pub fn fit(fields: &[String], sep: &str, indent: usize) -> String {
    fit_from(String::new(), fields, sep, indent)
}

/// As [`fit`], the fields following `first` (a table row's figures) on its line.
pub fn fit_from(first: String, fields: &[String], sep: &str, indent: usize) -> String {
    let pad = " ".repeat(indent);
    let mut lines: Vec<String> = vec![first];
    for field in fields.iter().filter(|f| !f.is_empty()) {
        let line = lines.last_mut().expect("one line at least");
        let fresh = line.trim().is_empty();
        let joined = if fresh { width(line) + width(field) } else { width(line) + width(sep) + width(field) };
        if joined <= WIDTH {
            if !fresh {
                line.push_str(sep);
            }
            line.push_str(field);
            continue;
        }
        if !fresh {
            lines.push(pad.clone());
        }
        // The field starts a line (after the indent); words that do not fit go on.
        for word in field.split(' ') {
            let line = lines.last_mut().expect("one line at least");
            let fresh = line.trim().is_empty();
            if !fresh && width(line) + 1 + width(word) > WIDTH {
                lines.push(format!("{pad}{word}"));
            } else {
                if !fresh {
                    line.push(' ');
                }
                line.push_str(word);
            }
        }
    }
    lines.iter().map(|l| l.trim_end()).collect::<Vec<_>>().join("\n")
}

/// A sentence broken between words into lines of at most WIDTH characters, lines after the
/// first indented.
pub fn wrap(sentence: &str, indent: usize) -> String {
    // The sentence's own leading spaces (a list item's) stay on its first line.
    let body = sentence.trim_start_matches(' ');
    fit_from(sentence[..sentence.len() - body.len()].to_owned(), &[body.to_owned()], "", indent)
}

/// Text of several lines (a decision and its effect, a recommendation), each line wrapped as
/// [`wrap`] does.
pub fn wrap_lines(text: &str, indent: usize) -> String {
    text.lines().map(|l| wrap(l, indent)).collect::<Vec<_>>().join("\n")
}

/// A sentence broken between words, every line indented (a note under a table row).
pub fn block(sentence: &str, indent: usize) -> String {
    fit_from(" ".repeat(indent), &[sentence.to_owned()], "", indent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nouns_are_counted_as_english_counts_them() {
        assert_eq!(plural(1, "window"), "1 window");
        assert_eq!(plural(0, "window"), "0 windows");
        assert_eq!(plural(2, "process"), "2 processes");
        assert_eq!(plural(1, "process"), "1 process");
        assert_eq!(plural(3, "policy"), "3 policies");
        assert_eq!(plural(3, "day"), "3 days");
        assert_eq!(plural(2, "match"), "2 matches");
    }

    #[test]
    fn fitted_lines_stay_within_the_width_and_keep_every_word() {
        let fields: Vec<String> = (0..12).map(|i| format!("gen{i} 43 (43/s) p50 24µs p99 74µs")).collect();
        let out = fit(&fields, " | ", 9);
        assert!(out.lines().all(|l| width(l) <= WIDTH && !l.ends_with(' ')), "{out}");
        assert!(out.lines().skip(1).all(|l| l.starts_with("         g")), "{out}");
        let words =
            |s: &str| s.split([' ', '|', '\n']).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
        assert_eq!(words(&out), words(&fields.join(" | ")));
        let long = "word ".repeat(60);
        let out = wrap(long.trim(), 2);
        assert!(out.lines().count() >= 4 && out.lines().all(|l| width(l) <= WIDTH), "{out}");
        assert_eq!(out.split_whitespace().count(), 60);
        assert!(wrap("  • item", 4).starts_with("  • item"));
        let out = block(long.trim(), 11);
        assert!(out.lines().all(|l| width(l) <= WIDTH && l.starts_with("           w")), "{out}");
    }
}
