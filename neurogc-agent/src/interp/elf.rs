//! What neurogc needs from an interpreter ELF file: symbols (with the source file they belong to),
//! USDT notes, virtual-address → file-offset translation and static data. Parsing is the `object`
//! crate's; this module only asks it questions.
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use object::{
    Endianness, Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind,
    elf::FileHeader64,
    read::elf::{Dyn, FileHeader, SectionHeader},
};

pub struct Elf {
    /// Where the agent reads the file (may be a /proc/PID/map_files link).
    pub path: PathBuf,
    /// Mapped, not read: only the pages the lookups touch count against the agent's RSS
    /// (a libpython with DWARF is 25 MB).
    data: memmap2::Mmap,
}

/// A function symbol together with the `STT_FILE` symbol that precedes it in `.symtab`.
#[derive(Debug, Clone)]
pub struct FuncSymbol {
    pub name: String,
    pub address: u64,
    pub source_file: Option<String>,
}

/// One `stapsdt` note, with addresses already converted to file offsets (what uprobes take).
#[derive(Debug, Clone)]
pub struct UsdtNote {
    pub provider: String,
    pub name: String,
    pub args: String,
    pub file_offset: u64,
    /// File offset of the semaphore, 0 when the probe has none.
    pub semaphore_offset: u64,
}

impl Elf {
    pub fn open(path: &Path) -> Result<Elf> {
        let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: interpreter files are not rewritten in place while processes run them (a
        // package upgrade replaces the file, leaving this inode intact).
        let data =
            unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("mapping {}", path.display()))?;
        let elf = Elf { path: path.to_path_buf(), data };
        elf.object()?;
        Ok(elf)
    }

    fn object(&self) -> Result<object::File<'_>> {
        let file = object::File::parse(&*self.data)
            .with_context(|| format!("{} is not an ELF file", self.path.display()))?;
        anyhow::ensure!(
            file.format() == object::BinaryFormat::Elf && file.is_64(),
            "{} is not a 64-bit ELF file",
            self.path.display()
        );
        Ok(file)
    }

    pub fn has_symtab(&self) -> bool {
        self.object().is_ok_and(|f| f.symbol_table().is_some())
    }

    /// Address of a data or function symbol, from `.dynsym` or `.symtab`.
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        let file = self.object().ok()?;
        file.dynamic_symbols()
            .chain(file.symbols())
            .find(|s| s.name() == Ok(name) && s.address() != 0)
            .map(|s| s.address())
    }

    /// An exported function: (address, size) from `.dynsym`, which stripping keeps.
    pub fn exported_function(&self, name: &str) -> Option<(u64, u64)> {
        let file = self.object().ok()?;
        file.dynamic_symbols()
            .find(|s| s.kind() == SymbolKind::Text && s.name() == Ok(name) && s.address() != 0)
            .map(|s| (s.address(), s.size()))
    }

    /// Addresses of every exported function (`.dynsym`).
    pub fn exported_functions(&self) -> std::collections::HashSet<u64> {
        let Ok(file) = self.object() else { return Default::default() };
        file.dynamic_symbols().filter(|s| s.kind() == SymbolKind::Text).map(|s| s.address()).collect()
    }

    /// `[start, end)` of a section's addresses.
    pub fn section_range(&self, name: &str) -> Option<std::ops::Range<u64>> {
        let file = self.object().ok()?;
        let section = file.section_by_name(name)?;
        Some(section.address()..section.address() + section.size())
    }

    /// Function symbols of `.symtab`, each tagged with its translation unit. Only `.symtab` has
    /// the static functions CPython collects in; `.dynsym` never does.
    pub fn functions(&self) -> Vec<FuncSymbol> {
        let Ok(file) = self.object() else { return Vec::new() };
        let mut current_file = None;
        let mut out = Vec::new();
        for sym in file.symbols() {
            match sym.kind() {
                SymbolKind::File => current_file = sym.name().ok().map(str::to_owned),
                SymbolKind::Text if sym.address() != 0 => {
                    if let Ok(name) = sym.name() {
                        out.push(FuncSymbol {
                            name: name.to_owned(),
                            address: sym.address(),
                            source_file: current_file.clone(),
                        });
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// Virtual address → offset in the file, through the PT_LOAD segments.
    pub fn file_offset(&self, vaddr: u64) -> Option<u64> {
        let file = self.object().ok()?;
        file.segments().find_map(|seg| {
            let (off, size) = seg.file_range();
            (vaddr >= seg.address() && vaddr < seg.address() + size).then(|| vaddr - seg.address() + off)
        })
    }

    /// Lowest PT_LOAD virtual address: subtract it from where the file is mapped to get the bias.
    pub fn first_load_address(&self) -> u64 {
        self.object().ok().and_then(|f| f.segments().map(|s| s.address()).min()).unwrap_or(0)
    }

    /// Where each PT_LOAD segment ends in memory (`.bss` included) and its `p_flags`: the rest of
    /// that page is mapped but belongs to no section.
    pub fn segment_ends(&self) -> Vec<(u64, u32)> {
        let Ok(file) = self.object() else { return Vec::new() };
        file.segments()
            .filter_map(|s| match s.flags() {
                object::SegmentFlags::Elf { p_flags } => Some((s.address() + s.size(), p_flags)),
                _ => None,
            })
            .collect()
    }

    /// Bytes stored in the file at a virtual address (initialised data only).
    pub fn read_at(&self, vaddr: u64, len: usize) -> Option<&[u8]> {
        let off = self.file_offset(vaddr)? as usize;
        self.data.get(off..off + len)
    }

    pub fn section_address(&self, name: &str) -> Option<u64> {
        self.object().ok()?.section_by_name(name).map(|s| s.address())
    }

    pub fn soname(&self) -> Option<String> {
        self.dynamic_strings(object::elf::DT_SONAME).into_iter().next()
    }

    /// Libraries the dynamic loader will map (DT_NEEDED), e.g. `libpython3.11.so.1.0`.
    pub fn needed(&self) -> Vec<String> {
        self.dynamic_strings(object::elf::DT_NEEDED)
    }

    /// String values of the `.dynamic` entries with this tag.
    fn dynamic_strings(&self, tag: u32) -> Vec<String> {
        let data = &*self.data;
        let found = || -> Option<Vec<String>> {
            let header = FileHeader64::<Endianness>::parse(data).ok()?;
            let endian = header.endian().ok()?;
            let sections = header.sections(endian, data).ok()?;
            let (dynamic, index) = sections.dynamic(endian, data).ok()??;
            let strings = sections.strings(endian, data, index).ok()?;
            Some(
                dynamic
                    .iter()
                    .filter(|d| d.tag32(endian) == Some(tag))
                    .filter_map(|d| d.string(endian, strings).ok())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect(),
            )
        };
        found().unwrap_or_default()
    }

    /// All `stapsdt` notes. Addresses follow libbpf's rules: the probe address is corrected by
    /// `.stapsdt.base` (prelink), the semaphore address is not.
    pub fn usdt_notes(&self) -> Result<Vec<UsdtNote>> {
        let data = &*self.data;
        let header = FileHeader64::<Endianness>::parse(data)?;
        let endian = header.endian()?;
        let sections = header.sections(endian, data)?;
        let base_section = self.section_address(".stapsdt.base");
        let mut out = Vec::new();
        for section in sections.iter() {
            if sections.section_name(endian, section)? != b".note.stapsdt" {
                continue;
            }
            let Some(mut notes) = section.notes(endian, data)? else { continue };
            while let Some(note) = notes.next()? {
                if note.name() != b"stapsdt" || note.n_type(endian) != 3 {
                    continue;
                }
                let desc = note.desc();
                if desc.len() < 24 {
                    continue;
                }
                let word = |i: usize| u64::from_le_bytes(desc[i * 8..i * 8 + 8].try_into().unwrap());
                let (mut pc, base, semaphore) = (word(0), word(1), word(2));
                if let Some(actual) = base_section
                    && base != 0
                {
                    pc = pc.wrapping_add(actual).wrapping_sub(base);
                }
                let mut strings =
                    desc[24..].split(|&b| b == 0).map(|s| String::from_utf8_lossy(s).into_owned());
                let (Some(provider), Some(name)) = (strings.next(), strings.next()) else { continue };
                let args = strings.next().unwrap_or_default();
                let Some(file_offset) = self.file_offset(pc) else { continue };
                let semaphore_offset =
                    if semaphore == 0 { 0 } else { self.file_offset(semaphore).unwrap_or(0) };
                out.push(UsdtNote { provider, name, args, file_offset, semaphore_offset });
            }
        }
        Ok(out)
    }
}
