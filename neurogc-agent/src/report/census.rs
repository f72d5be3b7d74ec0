//! How a report writes what the collector freed (`session::garbage` tallies it).
use crate::session::garbage::ClosingEdge;

/// "gen0, gen1" ("auto" for the collector's own choice).
pub fn generations(gens: &[i64]) -> String {
    gens.iter().map(|&g| crate::sinks::view::census_generation(g)).collect::<Vec<_>>().join(", ")
}

/// ".parent → Tok 87%", after the class's name.
pub fn brief(e: &ClosingEdge) -> String {
    format!(".{} → {} {}", e.attr, e.to, super::pct(e.share))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_and_edges_read_briefly() {
        assert_eq!(generations(&[0, 2]), "gen0, gen2");
        assert_eq!(generations(&[-1]), "auto");
        let e = ClosingEdge { attr: "parent".into(), to: "Tok".into(), share: 45.0 / 52.0, sampled: 52 };
        assert_eq!(brief(&e), ".parent → Tok 87%");
    }
}
