use super::*;

/// `xtask/layouts/gc_counters.py` run by every default-build test interpreter: where it finds
/// threshold0 from the interpreter state, and the long-lived counters and the permanent
/// generation's head from threshold0, is where the table puts them (the free-threaded build
/// links nothing into the generations, so the script cannot find its counters there: its row
/// comes from `offsetof` and DWARF).
#[test]
fn the_table_is_where_gc_counters_py_finds_the_gc_state_on_every_test_build() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../xtask/layouts/gc_counters.py");
    let mut checked = Vec::new();
    for python in &crate::interp::test_pythons() {
        if python["free_threaded"].as_bool() == Some(true) {
            continue;
        }
        let out = measure(python, script);
        let (version, threshold0, long_lived, permanent) = parse(&out).unwrap_or_else(|| panic!("{out}"));
        let mut parts = version.split('.').skip(1).map(|p| p.parse::<u32>().unwrap());
        let (minor, micro) = (parts.next().unwrap(), parts.next());
        let row = row(minor, super::build(minor, micro, false)).unwrap();
        let Some(Gc::Known(gc)) = row.gc else {
            // 3.15: the state's shape is published; the counters were measured at its size.
            let Some(Gc::Published { generations, long_lived: Some((_, at)), permanent: Some(head) }) =
                row.gc
            else {
                panic!("{version}: no counters or permanent generation in the table");
            };
            assert_eq!(long_lived, at - (generations + 16), "{version}: {out}");
            assert_eq!(permanent, head - (generations + 16), "{version}: {out}");
            checked.push(version);
            continue;
        };
        // Debian's 3.13 aligns the generations at 20, not 24; the counters stay put.
        let from = [gc.generations + 16, gc.generations + 12];
        let at = gc.long_lived.unwrap();
        assert!(from.iter().any(|t| at - t == long_lived), "{version}: {out}, table {gc:?}");
        // 3.12 keeps immortal objects there too: a head that says nothing of a freeze is not read.
        match gc.permanent {
            Some(head) => {
                assert!(from.iter().any(|t| head - t == permanent), "{version}: {out}, table {gc:?}")
            }
            None => assert_eq!(minor, 12, "{version}: no permanent generation in the table"),
        }
        let known = match row.state {
            StateAt::Runtime(at) | StateAt::MainInterp { gc: at, .. } => Some(at),
            StateAt::Published => None,
        };
        if let Some(state) = known {
            assert_eq!(threshold0, state + gc.generations + 16, "{version}: {out}");
        }
        checked.push(version);
    }
    assert!(checked.len() >= 5, "too few test interpreters measured: {checked:?}");
}

/// Runs the script with `python` (in its root's own /proc where it has one), its output.
fn measure(python: &serde_json::Value, script: &str) -> String {
    let argv: Vec<&str> = python["argv"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let mut cmd = match python["root"].as_str() {
        Some(root) => {
            let mut c = std::process::Command::new("unshare");
            c.args(["--pid", "--fork", "--kill-child", &format!("--mount-proc={root}/proc")]).args(&argv);
            c
        }
        None => {
            let mut c = std::process::Command::new(argv[0]);
            c.args(&argv[1..]);
            c
        }
    };
    let out = cmd
        .arg("-")
        .stdin(std::fs::File::open(script).unwrap())
        .output()
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{argv:?}: {text}");
    text
}

/// "3.11.2: threshold0 at state+688; long_lived_total at threshold0+184, …; permanent
/// generation at threshold0+64".
fn parse(out: &str) -> Option<(String, u64, u64, u64)> {
    let (version, rest) = out.trim().split_once(": threshold0 at state+")?;
    let (t0, rest) = rest.split_once(';')?;
    let ll = rest.split_once("long_lived_total at threshold0+")?.1.split(',').next()?;
    let permanent = rest.split_once("permanent generation at threshold0+")?.1;
    Some((version.to_owned(), t0.parse().ok()?, ll.parse().ok()?, permanent.parse().ok()?))
}

/// `xtask/layouts/instances.py` run by every test interpreter, the free-threaded one included:
/// where it finds a class's cached keys, a keys object's entries and an instance's values is
/// what the table says.
#[test]
fn the_table_is_where_instances_py_finds_attributes_on_every_test_build() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../xtask/layouts/instances.py");
    let mut checked = Vec::new();
    for python in &crate::interp::test_pythons() {
        let out = measure(python, script);
        let m: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{out}: {e}"));
        let version = m["version"].as_str().unwrap();
        let mut parts = version.split('.').skip(1).map(|p| p.parse::<u32>().unwrap());
        let (minor, micro) = (parts.next().unwrap(), parts.next());
        let free_threaded = python["free_threaded"].as_bool() == Some(true);
        let row = row(minor, super::build(minor, micro, free_threaded)).unwrap();
        let t = row.instances.unwrap_or_else(|| panic!("{version}: no instance layout in the table"));
        let values = match (t.values, t.values_at) {
            (census_values::DICT, _) => "dict".to_owned(),
            (census_values::POINTER, -32) => "pointer".to_owned(),
            (census_values::TAGGED, -24) => "tagged".to_owned(),
            (census_values::INLINE, at) => format!("inline+{at}"),
            other => panic!("{version}: {other:?} is no way the script knows"),
        };
        assert_eq!(m["values"], values.as_str(), "{version}: {out}");
        let managed = (t.managed_dict != 0).then_some(t.managed_dict);
        assert_eq!(m["managed_dict"].as_i64(), managed, "{version}: {out}");
        assert_eq!(m["cached_keys"], t.cached_keys, "{version}: {out}");
        assert_eq!(m["entry_bytes"], t.entry_bytes, "{version}: {out}");
        assert_eq!(m["keys_entries"], if t.log2_indices { "log2" } else { "size" }, "{version}: {out}");
        checked.push(version.to_owned());
    }
    assert!(checked.len() >= 5, "too few test interpreters measured: {checked:?}");
}

/// The census walks each build's garbage as the build holds it, and none where that was never
/// measured: a guessed layout would walk another structure's words.
#[test]
fn each_build_says_how_its_garbage_is_held() {
    assert_eq!(row(8, Build::Default).unwrap().garbage, Garbage::StackList);
    for minor in 9..=15 {
        assert_eq!(row(minor, Build::Default).unwrap().garbage, Garbage::FlaggedList, "3.{minor}");
    }
    assert_eq!(row(13, Build::FreeThreaded).unwrap().garbage, Garbage::Worklist { head: 6 });
    assert_eq!(row(14, Build::FreeThreaded).unwrap().garbage, Garbage::Unknown);
}
