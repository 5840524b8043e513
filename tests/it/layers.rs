//! The module graph of `src/` and the rules it keeps: no import circle between files, nor
//! between the folders of `src/` at depth 1 and 2; each layer imports only from the layers below
//! it; no file over 500 lines of code, a `Rewriter` of a handful of fields; one `Framing` and one
//! `Upstream`. `cargo test --test it layers:: -- --nocapture` prints the graph, edges per folder.
//!
//! How the sources are read (std only: a small lexer, no parser):
//! - A file's literals and comments are blanked first (byte offsets kept, so lines hold), its
//!   doc comments (`///`, `//!`, `/** */`, `/*! */`) kept apart.
//! - An import is every path that starts with `crate::`, `super::`, `self::` or the name of a
//!   child module the file declares (`mod x;`): in `use` trees (braces expanded), in inline
//!   paths and macro arguments, and in doc comments too (an intra-doc link is a dependency for
//!   rustdoc and for the reader).
//! - Not an import: anything in an item under `#[cfg(test)]` (the common `mod tests { .. }`, a
//!   test-only `fn` or `impl`), whole files declared by a `#[cfg(test)] mod x;` (and what they
//!   declare); visibilities (`pub(super)`, `pub(in crate::a)`); `$crate` in a macro; `mod x;`
//!   itself.
//! - A path resolves to the deepest module file that exists along it
//!   (`crate::net::listen::Slots` is `src/net/listen/mod.rs`); when the rest of the path names
//!   something that file imports (`pub use a::X`, or a plain `use` a child reaches through
//!   `super::X`), the import is followed to the file the item comes from.
//! - `src/main.rs` is a crate of its own (it imports `toolpulse::`): it is not read for edges.
//!   `src/lib.rs` only declares the layers: its edges are exempt from the rules.
//! - The folders of a circle between folders are the module paths cut at depth 1 (`net`) and
//!   at depth 2 (`net/listen`); a file at that depth (`src/metrics.rs`, `src/net/server.rs`) is
//!   a folder of its own there, so a circle between two such files shows in both lists.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::ops::Range;
use std::path::Path;

/// The layers, by top-level module of `src/`: an import goes to a strictly lower rank or stays
/// in its own top-level module (so `core` and `http1`, both 0, never import each other).
const RANKS: &[(&str, u8)] = &[
    ("core", 0),
    ("http1", 0),
    ("config", 1),
    ("metrics", 2),
    ("net", 3),
    ("features", 4),
    ("proxy", 5),
    ("app", 6),
];

/// Top-level modules outside the layers: the stream's invariant checker, a test oracle on its
/// way out of the library.
const EXEMPT: &[&str] = &["invariants"];

const MAX_FILE_LOC: usize = 500;
/// The rewriter holds its parts, one field per sub-machine; its file stays smaller than most.
const REWRITER_FILE: &str = "src/core/rewrite/mod.rs";
const MAX_REWRITER_FILE_LOC: usize = 399;
const MAX_REWRITER_FIELDS: usize = 10;
/// The key `KNOWN_OVER_SIZE` uses for the `Rewriter`'s field count.
const REWRITER_FIELDS: &str = "struct Rewriter";
/// Types of which `src/` has at most one (one HTTP/1 framing for both roles, one upstream).
const SINGLE_TYPES: &[&str] = &["Framing", "Upstream"];

// The violations known at this branch's end, while the layers are being fixed in parallel.
// Each list only shrinks: an entry that no longer occurs fails the test as well, so the lists
// stay exact (remove the entry with the fix). `LAYERS_PRINT_KNOWN=1` prints them as the sources
// need them now; unformatted, one entry a line, to read and to diff.

/// Edges that close a circle between files: `(from, to)`.
#[rustfmt::skip]
const KNOWN_FILE_CIRCLES: &[(&str, &str)] = &[
];
/// Edges that close a circle between folders of `src/` at depth 1 or 2: `(from, to)`, as
/// `"net/listen"`.
#[rustfmt::skip]
const KNOWN_FOLDER_CIRCLES: &[(&str, &str)] = &[
];
/// Imports that go up or sideways between layers: `(from file, to file)`.
#[rustfmt::skip]
const KNOWN_LAYER_EDGES: &[(&str, &str)] = &[
];
/// Files over their size, and `REWRITER_FIELDS` for the `Rewriter`'s fields.
#[rustfmt::skip]
const KNOWN_OVER_SIZE: &[&str] = &[
];
/// Types defined more than once: the name and every file that defines it.
#[rustfmt::skip]
const KNOWN_DUPLICATE_TYPES: &[(&str, &[&str])] = &[
];

// ---------------------------------------------------------------------------------------------
// Lexing

/// A source with its literals and comments blanked to spaces (newlines kept, so offsets and
/// lines hold), and its doc comments apart, by offset.
struct Lexed {
    code: Vec<u8>,
    docs: Vec<(usize, String)>,
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn blank(code: &mut [u8], range: Range<usize>) {
    for c in &mut code[range] {
        if *c != b'\n' {
            *c = b' ';
        }
    }
}

fn lex(src: &str) -> Lexed {
    let b = src.as_bytes();
    let mut code = b.to_vec();
    let mut docs = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let rest = &b[i..];
        if rest.starts_with(b"//") {
            let end = memchr(b'\n', b, i).unwrap_or(b.len());
            let text = &src[i..end];
            if (text.starts_with("///") && !text.starts_with("////")) || text.starts_with("//!") {
                docs.push((i, text[3..].to_string()));
            }
            blank(&mut code, i..end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let (start, mut depth) = (i, 0usize);
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            let text = &src[start..i];
            let outer = text.starts_with("/**") && !text.starts_with("/***") && text != "/**/";
            if outer || text.starts_with("/*!") {
                docs.push((start, text.to_string()));
            }
            blank(&mut code, start..i);
        } else if b[i] == b'"' {
            let end = string_end(b, i);
            blank(&mut code, i + 1..end - 1);
            i = end;
        } else if b[i] == b'\'' {
            i = char_or_lifetime(b, &mut code, i);
        } else if is_ident(b[i]) {
            let start = i;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
            let word = &b[start..i];
            if (word == b"r" || word == b"br" || word == b"cr") && i < b.len() {
                i = raw_string(b, &mut code, i);
            } else if word == b"b" && b.get(i) == Some(&b'\'') {
                i = char_or_lifetime(b, &mut code, i);
            }
        } else {
            i += 1;
        }
    }
    Lexed { code, docs }
}

fn memchr(needle: u8, hay: &[u8], from: usize) -> Option<usize> {
    hay[from..]
        .iter()
        .position(|&c| c == needle)
        .map(|p| p + from)
}

/// The offset after the closing quote of the string opening at `start`.
fn string_end(b: &[u8], start: usize) -> usize {
    let mut j = start + 1;
    while j < b.len() {
        match b[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    b.len()
}

/// After an `r` (or `br`, `cr`) at `at`: a raw string (blanked, its end returned) or a raw
/// identifier such as `r#type` (left as it is).
fn raw_string(b: &[u8], code: &mut [u8], at: usize) -> usize {
    let mut j = at;
    while j < b.len() && b[j] == b'#' {
        j += 1;
    }
    if b.get(j) != Some(&b'"') {
        return at;
    }
    let hashes = j - at;
    let body = j + 1;
    let mut k = body;
    while k < b.len() {
        if b[k] == b'"'
            && b[k + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == b'#')
                .count()
                == hashes
        {
            blank(code, body..k);
            return k + 1 + hashes;
        }
        k += 1;
    }
    blank(code, body..b.len());
    b.len()
}

/// At a `'`: a char literal (blanked, its end returned) or a lifetime or label (skipped).
fn char_or_lifetime(b: &[u8], code: &mut [u8], at: usize) -> usize {
    if b.get(at + 1) == Some(&b'\\') {
        let mut j = at + 3;
        while j < b.len() && b[j] != b'\'' {
            j += 1;
        }
        blank(code, at + 1..j);
        return j + 1;
    }
    let Some(&lead) = b.get(at + 1) else {
        return at + 1;
    };
    let len = match lead {
        0x00..=0x7f => 1,
        0xc0..=0xdf => 2,
        0xe0..=0xef => 3,
        _ => 4,
    };
    if b.get(at + 1 + len) == Some(&b'\'') {
        blank(code, at + 1..at + 1 + len);
        at + 2 + len
    } else {
        at + 1
    }
}

/// The offset of the bracket closing the one at `open` (all kinds counted alike: literals and
/// comments are blanked, so the brackets balance).
fn closing(code: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    for (j, &c) in code.iter().enumerate().skip(open) {
        match c {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
    }
    code.len()
}

fn skip_ws(code: &[u8], mut j: usize) -> usize {
    while j < code.len() && code[j].is_ascii_whitespace() {
        j += 1;
    }
    j
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    (from..hay.len().saturating_sub(needle.len() - 1)).find(|&j| hay[j..].starts_with(needle))
}

/// The words of the code with their offsets.
fn words(code: &[u8]) -> impl Iterator<Item = (usize, &str)> {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < code.len() && !is_ident(code[i]) {
            i += 1;
        }
        if i >= code.len() {
            return None;
        }
        let start = i;
        while i < code.len() && is_ident(code[i]) {
            i += 1;
        }
        let word = std::str::from_utf8(&code[start..i]).expect("ASCII identifier");
        Some((start, word))
    })
}

/// The byte ranges of the items under `#[cfg(test)]`: the attribute, any attributes after it,
/// and the item up to its `;` or the end of its block.
fn test_ranges(code: &[u8]) -> Vec<Range<usize>> {
    const ATTR: &[u8] = b"#[cfg(test)]";
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = find(code, ATTR, from) {
        let mut j = skip_ws(code, at + ATTR.len());
        while code[j..].starts_with(b"#[") {
            j = skip_ws(code, closing(code, j + 1) + 1);
        }
        let end = item_end(code, j);
        out.push(at..end);
        from = end;
    }
    out
}

fn item_end(code: &[u8], start: usize) -> usize {
    let keyword = words(&code[start..])
        .map(|(_, w)| w)
        .find(|w| !["pub", "crate", "super", "in"].contains(w));
    // A `const` or `let` may hold a block (`X { .. }`) before its `;`.
    let to_semicolon = matches!(keyword, Some("use" | "const" | "static" | "type" | "let"));
    let mut depth = 0isize;
    let mut j = start;
    while j < code.len() {
        match code[j] {
            b'{' if depth == 0 && !to_semicolon => return closing(code, j) + 1,
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                // The attribute was on the last expression of a block.
                if depth < 0 {
                    return j;
                }
            }
            b';' if depth == 0 => return j + 1,
            _ => {}
        }
        j += 1;
    }
    code.len()
}

// ---------------------------------------------------------------------------------------------
// Paths

/// A path as written (`super::budget::Paced`) and where.
#[derive(Clone, Debug)]
struct Reference {
    offset: usize,
    segments: Vec<String>,
    text: String,
}

/// The paths in `text` that start with `crate`, `super`, `self` or one of `children`, followed
/// by `::`. A start after `::` (`hyper::body`), `$` (`$crate`) or inside a word is not one.
fn scan_paths(text: &[u8], children: &BTreeSet<String>) -> Vec<Reference> {
    let mut out = Vec::new();
    let mut words = words(text).peekable();
    while let Some((start, word)) = words.next() {
        let starts = ["crate", "super", "self"].contains(&word) || children.contains(word);
        let before = text[..start].trim_ascii_end();
        if !starts || before.ends_with(b"::") || before.ends_with(b"$") {
            continue;
        }
        let mut segments = vec![word.to_string()];
        let mut end = start + word.len();
        while text[end..].starts_with(b"::") {
            let Some(&(next, w)) = words.peek() else {
                break;
            };
            if next != end + 2 {
                break;
            }
            words.next();
            segments.push(w.to_string());
            end = next + w.len();
        }
        if segments.len() > 1 {
            let text = String::from_utf8_lossy(&text[start..end]).into_owned();
            out.push(Reference {
                offset: start,
                segments,
                text,
            });
        }
    }
    out
}

/// One leaf of a `use` tree: its full path and the name it brings in (`None` for a glob).
#[derive(Debug, PartialEq)]
struct UseLeaf {
    path: Vec<String>,
    name: Option<String>,
}

/// The leaves of the `use` tree in `tree` (the text between `use` and `;`).
fn expand_use(tree: &str) -> Vec<UseLeaf> {
    let mut tokens = Vec::new();
    let b = tree.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if is_ident(b[i]) {
            let start = i;
            while i < b.len() && is_ident(b[i]) {
                i += 1;
            }
            tokens.push(&tree[start..i]);
        } else if b[i..].starts_with(b"::") {
            tokens.push("::");
            i += 2;
        } else if b"{},*".contains(&b[i]) {
            tokens.push(&tree[i..i + 1]);
            i += 1;
        } else {
            i += 1;
        }
    }
    let mut out = Vec::new();
    let mut pos = 0;
    use_tree(&tokens, &mut pos, Vec::new(), &mut out);
    out
}

fn use_tree(t: &[&str], pos: &mut usize, prefix: Vec<String>, out: &mut Vec<UseLeaf>) {
    let mut path = prefix;
    if t.get(*pos) == Some(&"::") {
        // `use ::std::..`: an extern crate.
        *pos += 1;
        path.push("::".into());
    }
    loop {
        match t.get(*pos).copied() {
            Some("{") => {
                *pos += 1;
                while t.get(*pos).is_some_and(|&x| x != "}") {
                    use_tree(t, pos, path.clone(), out);
                    if t.get(*pos) == Some(&",") {
                        *pos += 1;
                    }
                }
                *pos += 1;
                return;
            }
            Some("*") => {
                *pos += 1;
                out.push(UseLeaf { path, name: None });
                return;
            }
            Some(w) if w != "}" && w != "," && w != "as" && w != "::" => {
                *pos += 1;
                if w != "self" || path.is_empty() {
                    path.push(w.to_string());
                }
            }
            _ => break,
        }
        if t.get(*pos) == Some(&"::") {
            *pos += 1;
        } else {
            break;
        }
    }
    let name = if t.get(*pos) == Some(&"as") {
        *pos += 2;
        t.get(*pos - 1).map(|s| s.to_string())
    } else {
        path.last().cloned()
    };
    out.push(UseLeaf { path, name });
}

// ---------------------------------------------------------------------------------------------
// The module tree and its edges

struct File {
    /// As `src/net/listen/mod.rs`.
    path: String,
    /// As `["net", "listen"]`; empty for `src/lib.rs`.
    module: Vec<String>,
    /// Declared under `#[cfg(test)]` (or inside such a file): not read for edges.
    test_only: bool,
    children: BTreeSet<String>,
    /// The non-test code, literals and comments blanked.
    code: Vec<u8>,
    docs: Vec<(usize, String)>,
    /// `use` leaves: (offset, leaf).
    uses: Vec<(usize, UseLeaf)>,
    /// `mod x;` declarations: the name, and whether under `#[cfg(test)]`.
    declared: Vec<(String, bool)>,
    /// Where each line starts, for line numbers.
    lines: Vec<usize>,
}

impl File {
    fn line(&self, offset: usize) -> usize {
        self.lines.partition_point(|&start| start <= offset)
    }
}

#[derive(Clone, Debug)]
struct Edge {
    from: usize,
    to: usize,
    /// The path as written and where: the first one found for this pair of files.
    text: String,
    line: usize,
}

struct Tree {
    files: Vec<File>,
    by_module: BTreeMap<Vec<String>, usize>,
    edges: Vec<Edge>,
}

impl Tree {
    /// Reads the crate from `sources` (`src/...` paths to their text), from `src/lib.rs` down
    /// its `mod` declarations.
    fn read(sources: &BTreeMap<String, String>) -> Tree {
        let mut tree = Tree {
            files: Vec::new(),
            by_module: BTreeMap::new(),
            edges: Vec::new(),
        };
        let mut queue = VecDeque::from([("src/lib.rs".to_string(), Vec::new(), false)]);
        while let Some((path, module, test_only)) = queue.pop_front() {
            let text = sources
                .get(&path)
                .unwrap_or_else(|| panic!("{path} is declared as a module but not found"));
            let file = parse_file(path, module, test_only, text);
            for (name, child_test_only) in file.declared.clone() {
                if name.starts_with("{inline}") {
                    continue;
                }
                let dir = file
                    .path
                    .strip_suffix("mod.rs")
                    .or_else(|| file.path.strip_suffix("lib.rs"))
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{}/", file.path.trim_end_matches(".rs")));
                let flat = format!("{dir}{name}.rs");
                let nested = format!("{dir}{name}/mod.rs");
                let child = if sources.contains_key(&flat) {
                    flat
                } else {
                    nested
                };
                let mut child_module = file.module.clone();
                child_module.push(name);
                queue.push_back((child, child_module, test_only || child_test_only));
            }
            tree.by_module.insert(file.module.clone(), tree.files.len());
            tree.files.push(file);
        }
        tree.edges = (0..tree.files.len())
            .filter(|&f| !tree.files[f].test_only)
            .flat_map(|f| tree.edges_of(f))
            .collect();
        tree
    }

    fn edges_of(&self, from: usize) -> Vec<Edge> {
        let file = &self.files[from];
        let mut refs: Vec<Reference> = file
            .uses
            .iter()
            .map(|(offset, leaf)| Reference {
                offset: *offset,
                segments: leaf.path.clone(),
                text: leaf.path.join("::"),
            })
            .collect();
        refs.extend(scan_paths(&file.code, &file.children));
        for (offset, doc) in &file.docs {
            refs.extend(
                scan_paths(doc.as_bytes(), &file.children)
                    .into_iter()
                    .map(|mut r| {
                        r.offset = *offset;
                        r
                    }),
            );
        }
        let mut seen = BTreeMap::new();
        for r in refs {
            let Some(absolute) = absolute(&file.module, &r.segments, &file.children) else {
                continue;
            };
            let to = self.resolve(&absolute, 0);
            if to != from {
                seen.entry(to).or_insert(Edge {
                    from,
                    to,
                    text: r.text,
                    line: file.line(r.offset),
                });
            }
        }
        seen.into_values().collect()
    }

    /// The file of the deepest module along `path`, through the imports of that file.
    fn resolve(&self, path: &[String], hops: usize) -> usize {
        let depth = (0..=path.len())
            .rev()
            .find(|&k| self.by_module.contains_key(&path[..k]))
            .expect("the crate root is a module");
        let file = self.by_module[&path[..depth]];
        if depth < path.len() && hops < 8 {
            let f = &self.files[file];
            let imported = f
                .uses
                .iter()
                .find(|(_, leaf)| leaf.name.as_deref() == Some(path[depth].as_str()));
            if let Some((_, leaf)) = imported
                && let Some(mut target) = absolute(&f.module, &leaf.path, &f.children)
            {
                target.extend_from_slice(&path[depth + 1..]);
                return self.resolve(&target, hops + 1);
            }
        }
        file
    }

    fn name(&self, file: usize) -> &str {
        &self.files[file].path
    }
}

/// `segments` as written in the module `module`, from the crate root; `None` for a path into
/// another crate.
fn absolute(
    module: &[String],
    segments: &[String],
    children: &BTreeSet<String>,
) -> Option<Vec<String>> {
    let first = segments.first()?.as_str();
    let (mut base, mut rest) = match first {
        "crate" => (Vec::new(), &segments[1..]),
        "self" => (module.to_vec(), &segments[1..]),
        "super" => (module.to_vec(), segments),
        _ if children.contains(first) => (module.to_vec(), segments),
        _ => return None,
    };
    while rest.first().is_some_and(|s| s == "super") {
        base.pop()?;
        rest = &rest[1..];
    }
    base.extend_from_slice(rest);
    Some(base)
}

fn parse_file(path: String, module: Vec<String>, test_only: bool, text: &str) -> File {
    let Lexed { mut code, docs } = lex(text);
    let tests = test_ranges(&code);
    let in_tests = |offset: usize| tests.iter().any(|r| r.contains(&offset));
    // Declarations first: a test-only `mod x;` is found in the code before it is blanked.
    let mut children = BTreeSet::new();
    let mut declared = Vec::new();
    for (name, offset) in mod_declarations(&code) {
        let test = in_tests(offset);
        if !name.starts_with("{inline}") {
            children.insert(name.clone());
        }
        declared.push((name, test));
    }
    for r in &tests {
        blank(&mut code, r.clone());
    }
    // `pub(in crate::a)` names where an item is visible, not what it uses.
    let mut from = 0;
    while let Some(at) = find(&code, b"pub(in ", from) {
        let end = closing(&code, at + 3);
        blank(&mut code, at..end);
        from = end;
    }
    let whole_file_test = text.contains("#![cfg(test)]");
    let docs = docs.into_iter().filter(|(o, _)| !in_tests(*o)).collect();
    let mut uses = Vec::new();
    let use_starts: Vec<usize> = words(&code)
        .filter(|&(_, w)| w == "use")
        .map(|(o, _)| o)
        .collect();
    for at in use_starts {
        let end = memchr(b';', &code, at).unwrap_or(code.len());
        let tree = String::from_utf8_lossy(&code[at + 3..end]).into_owned();
        uses.extend(expand_use(&tree).into_iter().map(|leaf| (at, leaf)));
        // Read once, as a tree: the paths in it are not read again as inline paths.
        blank(&mut code, at..end);
    }
    let lines = std::iter::once(0)
        .chain(text.match_indices('\n').map(|(o, _)| o + 1))
        .collect();
    let mut file = File {
        path,
        module,
        test_only: test_only || whole_file_test,
        children,
        code,
        docs,
        uses,
        declared,
        lines,
    };
    file.uses.retain(|(_, leaf)| !leaf.path.is_empty());
    file
}

/// `mod x;` declarations: the name and offset. An inline `mod x { .. }` outside tests would
/// need the reader to follow it; none exists, and the test says so if one appears.
fn mod_declarations(code: &[u8]) -> Vec<(String, usize)> {
    let all: Vec<(usize, &str)> = words(code).collect();
    let mut out = Vec::new();
    for pair in all.windows(2) {
        let [(at, "mod"), (name_at, name)] = pair else {
            continue;
        };
        let after = skip_ws(code, name_at + name.len());
        match code.get(after) {
            Some(b';') => out.push((name.to_string(), *at)),
            Some(b'{') => out.push((format!("{{inline}}{name}"), *at)),
            _ => {}
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Circles

/// A graph of named nodes; each edge keeps a label (the file edge that makes it).
type Graph = BTreeMap<(String, String), String>;

/// A circle found by a depth-first walk, in sorted order, and the edge that closes it (from
/// the last node back to the first).
#[derive(Debug, PartialEq)]
struct Circle {
    nodes: Vec<String>,
    closing: (String, String),
}

/// The circles of `graph`, one per back edge of a depth-first walk: removing every closing edge
/// leaves no circle.
fn circles(graph: &Graph) -> Vec<Circle> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in graph.keys() {
        next.entry(from).or_default().push(to);
        next.entry(to).or_default();
    }
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut mark: BTreeMap<&str, Mark> = next.keys().map(|&n| (n, Mark::New)).collect();
    let mut out = Vec::new();
    fn visit<'a>(
        node: &'a str,
        next: &BTreeMap<&'a str, Vec<&'a str>>,
        mark: &mut BTreeMap<&'a str, Mark>,
        stack: &mut Vec<&'a str>,
        out: &mut Vec<Circle>,
    ) {
        mark.insert(node, Mark::Open);
        stack.push(node);
        for &to in &next[node] {
            match mark[to] {
                Mark::New => visit(to, next, mark, stack, out),
                Mark::Open => {
                    let start = stack
                        .iter()
                        .position(|&n| n == to)
                        .expect("open is stacked");
                    out.push(Circle {
                        nodes: stack[start..].iter().map(|s| s.to_string()).collect(),
                        closing: (node.to_string(), to.to_string()),
                    });
                }
                Mark::Done => {}
            }
        }
        stack.pop();
        mark.insert(node, Mark::Done);
    }
    let nodes: Vec<&str> = next.keys().copied().collect();
    for node in nodes {
        if mark[node] == Mark::New {
            visit(node, &next, &mut mark, &mut Vec::new(), &mut out);
        }
    }
    out
}

/// Whether `to` reaches `from` in `graph`: the edge `from -> to` is on a circle.
fn on_circle(graph: &Graph, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::from([to]);
    let mut queue = VecDeque::from([to]);
    while let Some(n) = queue.pop_front() {
        if n == from {
            return true;
        }
        for ((a, b), _) in graph.range((n.to_string(), String::new())..) {
            if a != n {
                break;
            }
            if seen.insert(b) {
                queue.push_back(b);
            }
        }
    }
    false
}

/// The failures of `graph` against its allowlist `known`: circles left once the known closing
/// edges are removed, and known edges that no longer close one.
fn check_circles(what: &str, list: &str, graph: &Graph, known: &[(&str, &str)]) -> Vec<String> {
    let mut failures = Vec::new();
    let known: BTreeSet<(String, String)> = known
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    for (from, to) in &known {
        if !graph.contains_key(&(from.clone(), to.clone())) || !on_circle(graph, from, to) {
            failures.push(format!(
                "{list} lists (\"{from}\", \"{to}\"), which no longer closes a circle: remove it"
            ));
        }
    }
    let rest: Graph = graph
        .iter()
        .filter(|(k, _)| !known.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for circle in circles(&rest) {
        let (from, to) = &circle.closing;
        let mut ring = circle.nodes.join(" -> ");
        write!(ring, " -> {}", circle.nodes[0]).expect("a String");
        failures.push(format!(
            "circle between {what}: {ring}; the edge that closes it: {from} -> {to} ({})",
            rest[&circle.closing]
        ));
    }
    failures
}

/// The folder at `depth` (1 or 2) of a file, as `net/listen`; `None` for a file above it.
fn folder(tree: &Tree, file: usize, depth: usize) -> Option<String> {
    let module = &tree.files[file].module;
    (module.len() >= depth).then(|| module[..depth].join("/"))
}

fn label(tree: &Tree, e: &Edge) -> String {
    format!(
        "{} -> {}: `{}` at line {}",
        tree.name(e.from),
        tree.name(e.to),
        e.text,
        e.line
    )
}

/// Whether an edge leaves or enters a top-level module outside the layers (`EXEMPT`).
fn exempt(tree: &Tree, e: &Edge) -> bool {
    [e.from, e.to].iter().any(|&f| {
        let top = tree.files[f].module.first();
        top.is_some_and(|t| EXEMPT.contains(&t.as_str()))
    })
}

fn file_graph(tree: &Tree) -> Graph {
    tree.edges
        .iter()
        .filter(|e| !exempt(tree, e))
        .map(|e| {
            let key = (tree.name(e.from).to_string(), tree.name(e.to).to_string());
            (key, format!("`{}` at line {}", e.text, e.line))
        })
        .collect()
}

fn folder_graph(tree: &Tree, depth: usize) -> Graph {
    let mut graph = Graph::new();
    for e in tree.edges.iter().filter(|e| !exempt(tree, e)) {
        if let (Some(a), Some(b)) = (folder(tree, e.from, depth), folder(tree, e.to, depth))
            && a != b
        {
            graph.entry((a, b)).or_insert_with(|| label(tree, e));
        }
    }
    graph
}

// ---------------------------------------------------------------------------------------------
// Layers, sizes, types

fn rank(top: &str) -> Option<u8> {
    RANKS.iter().find(|(name, _)| *name == top).map(|&(_, r)| r)
}

/// Imports that do not go to a strictly lower layer (or stay in their top-level module).
fn layer_violations(tree: &Tree) -> Result<BTreeMap<(String, String), String>, String> {
    let mut out = BTreeMap::new();
    for e in &tree.edges {
        let (from, to) = (&tree.files[e.from].module, &tree.files[e.to].module);
        let (Some(a), Some(b)) = (from.first(), to.first()) else {
            continue;
        };
        if a == b || EXEMPT.contains(&a.as_str()) || EXEMPT.contains(&b.as_str()) {
            continue;
        }
        let no_rank = |m: &str| format!("no layer for src/{m}: add it to RANKS in tests/layers.rs");
        let ra = rank(a).ok_or_else(|| no_rank(a))?;
        let rb = rank(b).ok_or_else(|| no_rank(b))?;
        if rb >= ra {
            let key = (tree.name(e.from).to_string(), tree.name(e.to).to_string());
            out.insert(
                key,
                format!("{a} ({ra}) imports {b} ({rb}): {}", label(tree, e)),
            );
        }
    }
    Ok(out)
}

fn check_layers(tree: &Tree, known: &[(&str, &str)]) -> Vec<String> {
    let violations = match layer_violations(tree) {
        Ok(v) => v,
        Err(e) => return vec![e],
    };
    let known: BTreeSet<(String, String)> = known
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let mut failures: Vec<String> = violations
        .iter()
        .filter(|(k, _)| !known.contains(*k))
        .map(|((a, b), why)| {
            format!("import against the layers: {why} (entry: (\"{a}\", \"{b}\"))")
        })
        .collect();
    for (a, b) in known.iter().filter(|k| !violations.contains_key(*k)) {
        failures.push(format!(
            "KNOWN_LAYER_EDGES lists (\"{a}\", \"{b}\"), which no longer occurs: remove it"
        ));
    }
    failures
}

/// Non-blank lines that are not `//` comment lines (doc comments included in those).
fn lines_of_code(text: &str) -> usize {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .count()
}

/// The fields of `struct Rewriter`, counted as `name:` lines at the top of its body (the code
/// is rustfmt's: one field a line).
fn rewriter_fields(tree: &Tree) -> Option<(String, usize)> {
    tree.files
        .iter()
        .filter(|f| f.path.starts_with("src/core/rewrite/") && !f.test_only)
        .find_map(|f| {
            let at = find(&f.code, b"struct Rewriter", 0)?;
            let open = at + memchr(b'{', &f.code[at..], 0)?;
            let body = &f.code[open + 1..closing(&f.code, open)];
            let mut depth = 0isize;
            let mut fields = 0;
            for line in body.split(|&c| c == b'\n') {
                let text = String::from_utf8_lossy(line);
                let t = text.trim_start().trim_start_matches("pub(crate) ");
                let t = t.trim_start_matches("pub ");
                let name_len = t.bytes().take_while(|&c| is_ident(c)).count();
                let field = name_len > 0
                    && t[name_len..].starts_with(':')
                    && !t[name_len..].starts_with("::");
                if depth == 0 && field {
                    fields += 1;
                }
                for c in line {
                    match c {
                        b'(' | b'[' | b'{' => depth += 1,
                        b')' | b']' | b'}' => depth -= 1,
                        _ => {}
                    }
                }
            }
            Some((f.path.clone(), fields))
        })
}

/// What is over its size now: files over their limit, and `REWRITER_FIELDS`, with why.
fn over_size(sources: &BTreeMap<String, String>, tree: &Tree) -> BTreeMap<String, String> {
    let mut over = BTreeMap::new();
    for (path, text) in sources {
        let limit = if path == REWRITER_FILE {
            MAX_REWRITER_FILE_LOC
        } else {
            MAX_FILE_LOC
        };
        let loc = lines_of_code(text);
        if loc > limit {
            over.insert(
                path.clone(),
                format!("{path}: {loc} lines of code, over {limit}"),
            );
        }
    }
    match rewriter_fields(tree) {
        Some((path, n)) if n > MAX_REWRITER_FIELDS => {
            let why = format!("{path}: struct Rewriter has {n} fields, over {MAX_REWRITER_FIELDS}");
            over.insert(REWRITER_FIELDS.to_string(), why);
        }
        Some(_) => {}
        None => {
            let why = "struct Rewriter not found under src/core/rewrite/".to_string();
            over.insert(REWRITER_FIELDS.to_string(), why);
        }
    }
    over
}

fn check_sizes(sources: &BTreeMap<String, String>, tree: &Tree, known: &[&str]) -> Vec<String> {
    let over = over_size(sources, tree);
    let mut failures: Vec<String> = over
        .iter()
        .filter(|(k, _)| !known.contains(&k.as_str()))
        .map(|(k, why)| format!("too big: {why} (entry: \"{k}\")"))
        .collect();
    for k in known.iter().filter(|k| !over.contains_key(**k)) {
        failures.push(format!(
            "KNOWN_OVER_SIZE lists \"{k}\", which is within its limit now: remove it"
        ));
    }
    failures
}

/// Where each of `SINGLE_TYPES` is defined (`struct`, `enum`, `type`, `trait`, `union`), in
/// non-test code: the files, sorted, once per definition.
fn type_definitions(tree: &Tree) -> BTreeMap<&'static str, Vec<String>> {
    let mut out: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    for f in tree.files.iter().filter(|f| !f.test_only) {
        let all: Vec<(usize, &str)> = words(&f.code).collect();
        for pair in all.windows(2) {
            let [(_, kind), (_, name)] = pair else {
                continue;
            };
            let kinds = ["struct", "enum", "type", "trait", "union"];
            if let Some(single) = SINGLE_TYPES.iter().find(|t| *t == name)
                && kinds.contains(kind)
            {
                out.entry(single).or_default().push(f.path.clone());
            }
        }
    }
    out.values_mut().for_each(|v| v.sort());
    out
}

fn check_types(tree: &Tree, known: &[(&str, &[&str])]) -> Vec<String> {
    let defs = type_definitions(tree);
    let mut failures = Vec::new();
    for name in SINGLE_TYPES {
        let found = defs.get(name).cloned().unwrap_or_default();
        let listed = known.iter().find(|(n, _)| n == name).map(|(_, files)| {
            let mut files: Vec<String> = files.iter().map(|s| s.to_string()).collect();
            files.sort();
            files
        });
        match listed {
            Some(files) if files != found => failures.push(format!(
                "KNOWN_DUPLICATE_TYPES lists {name} in {files:?}, but it is defined in \
                 {found:?}: make the entry exact (or remove it at one definition)"
            )),
            None if found.len() > 1 => failures.push(format!(
                "more than one type named {name}: {found:?} (entry: (\"{name}\", &{found:?}))"
            )),
            _ => {}
        }
    }
    failures
}

// ---------------------------------------------------------------------------------------------
// The report

fn report(tree: &Tree) -> String {
    let mut out = String::new();
    let non_test = tree.files.iter().filter(|f| !f.test_only).count();
    writeln!(
        out,
        "{} module files ({non_test} not test-only), {} file edges",
        tree.files.len(),
        tree.edges.len()
    )
    .expect("a String");
    for depth in [1, 2] {
        let mut counts: BTreeMap<(String, String), usize> = BTreeMap::new();
        for e in &tree.edges {
            if let (Some(a), Some(b)) = (folder(tree, e.from, depth), folder(tree, e.to, depth))
                && a != b
            {
                *counts.entry((a, b)).or_default() += 1;
            }
        }
        writeln!(out, "edges between folders at depth {depth} (file edges):").expect("a String");
        for ((a, b), n) in counts {
            writeln!(out, "  {a:>28} -> {b:<28} {n}").expect("a String");
        }
    }
    out
}

fn sources() -> BTreeMap<String, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = BTreeMap::new();
    let mut dirs = vec![root.join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read a folder of src/") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).expect("under the crate");
                let rel = rel.to_str().expect("UTF-8 path").replace('\\', "/");
                let text = std::fs::read_to_string(&path).expect("read a source file");
                out.insert(rel, text);
            }
        }
    }
    out
}

/// Every failure of the crate `sources` against the rules and the allowlists given.
fn failures(sources: &BTreeMap<String, String>, tree: &Tree, known: &Known) -> Vec<String> {
    let mut failures = Vec::new();
    for f in &tree.files {
        for (name, test) in &f.declared {
            if let Some(name) = name.strip_prefix("{inline}")
                && !test
                && !f.test_only
            {
                failures.push(format!(
                    "{}: inline `mod {name} {{ .. }}` outside tests: move it to a file (this \
                     reader does not follow inline modules)",
                    f.path
                ));
            }
        }
    }
    failures.extend(check_circles(
        "files",
        "KNOWN_FILE_CIRCLES",
        &file_graph(tree),
        known.file_circles,
    ));
    let mut folders = folder_graph(tree, 1);
    folders.extend(folder_graph(tree, 2));
    failures.extend(check_circles(
        "folders",
        "KNOWN_FOLDER_CIRCLES",
        &folders,
        known.folder_circles,
    ));
    failures.extend(check_layers(tree, known.layer_edges));
    failures.extend(check_sizes(sources, tree, known.over_size));
    failures.extend(check_types(tree, known.duplicate_types));
    failures
}

/// The allowlists as the sources need them now, in the syntax of the constants above: to start
/// them, or to see what a change adds (`LAYERS_PRINT_KNOWN=1`).
fn known_now(sources: &BTreeMap<String, String>, tree: &Tree) -> String {
    let mut out = String::new();
    let pairs = |out: &mut String, name: &str, mut pairs: Vec<(String, String)>| {
        pairs.sort();
        writeln!(out, "const {name}: &[(&str, &str)] = &[").expect("a String");
        for (a, b) in pairs {
            writeln!(out, "    (\"{a}\", \"{b}\"),").expect("a String");
        }
        writeln!(out, "];").expect("a String");
    };
    // The entries that still close a circle stay, so that a list changes only where the
    // graph did; a circle they leave gets the edge that closes it.
    let closing = |graph: &Graph, known: &[(&str, &str)]| {
        let mut kept: Vec<(String, String)> = known
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .filter(|k| graph.contains_key(k) && on_circle(graph, &k.0, &k.1))
            .collect();
        let mut rest = graph.clone();
        for k in &kept {
            rest.remove(k);
        }
        kept.extend(circles(&rest).into_iter().map(|c| c.closing));
        kept
    };
    let files = closing(&file_graph(tree), KNOWN.file_circles);
    pairs(&mut out, "KNOWN_FILE_CIRCLES", files);
    let mut folders = folder_graph(tree, 1);
    folders.extend(folder_graph(tree, 2));
    let folders = closing(&folders, KNOWN.folder_circles);
    pairs(&mut out, "KNOWN_FOLDER_CIRCLES", folders);
    let layers = layer_violations(tree).unwrap_or_default();
    pairs(&mut out, "KNOWN_LAYER_EDGES", layers.into_keys().collect());
    writeln!(out, "const KNOWN_OVER_SIZE: &[&str] = &[").expect("a String");
    for key in over_size(sources, tree).into_keys() {
        writeln!(out, "    \"{key}\",").expect("a String");
    }
    writeln!(out, "];").expect("a String");
    writeln!(out, "const KNOWN_DUPLICATE_TYPES: &[(&str, &[&str])] = &[").expect("a String");
    for (name, files) in type_definitions(tree)
        .into_iter()
        .filter(|(_, f)| f.len() > 1)
    {
        let files: Vec<String> = files.iter().map(|f| format!("\"{f}\"")).collect();
        writeln!(out, "    (\"{name}\", &[{}]),", files.join(", ")).expect("a String");
    }
    writeln!(out, "];").expect("a String");
    out
}

struct Known<'a> {
    file_circles: &'a [(&'a str, &'a str)],
    folder_circles: &'a [(&'a str, &'a str)],
    layer_edges: &'a [(&'a str, &'a str)],
    over_size: &'a [&'a str],
    duplicate_types: &'a [(&'a str, &'a [&'a str])],
}

const KNOWN: Known<'static> = Known {
    file_circles: KNOWN_FILE_CIRCLES,
    folder_circles: KNOWN_FOLDER_CIRCLES,
    layer_edges: KNOWN_LAYER_EDGES,
    over_size: KNOWN_OVER_SIZE,
    duplicate_types: KNOWN_DUPLICATE_TYPES,
};

#[test]
fn the_crate_keeps_its_layers() {
    let sources = sources();
    let tree = Tree::read(&sources);
    println!("{}", report(&tree));
    if std::env::var_os("LAYERS_PRINT_KNOWN").is_some() {
        println!("{}", known_now(&sources, &tree));
    }
    let failures = failures(&sources, &tree, &KNOWN);
    assert!(
        failures.is_empty(),
        "the module graph breaks {} rule(s) (tests/layers.rs says how it reads the sources):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The checker checked, on small synthetic crates

const NOTHING_KNOWN: Known<'static> = Known {
    file_circles: &[],
    folder_circles: &[],
    layer_edges: &[],
    over_size: &[],
    duplicate_types: &[],
};

fn crate_of(files: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut sources: BTreeMap<String, String> = files
        .iter()
        .map(|(p, t)| (p.to_string(), t.to_string()))
        .collect();
    // A `Rewriter` within its limits, so the size check has nothing to say of it.
    sources.insert(
        "src/core/rewrite/mod.rs".into(),
        "pub struct Rewriter {\n    a: u8,\n}\n".into(),
    );
    sources
}

fn edges(tree: &Tree) -> Vec<(String, String)> {
    let mut edges: Vec<(String, String)> = tree
        .edges
        .iter()
        .map(|e| (tree.name(e.from).to_string(), tree.name(e.to).to_string()))
        .collect();
    edges.sort();
    edges
}

#[test]
fn a_circle_is_found_with_the_edge_that_closes_it() {
    let graph: Graph = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .iter()
        .map(|(x, y)| ((x.to_string(), y.to_string()), format!("{x}->{y}")))
        .collect();
    let found = circles(&graph);
    assert_eq!(
        found,
        vec![Circle {
            nodes: vec!["a".into(), "b".into(), "c".into()],
            closing: ("c".into(), "a".into()),
        }]
    );
    let failures = check_circles("files", "KNOWN", &graph, &[]);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].contains("a -> b -> c -> a") && failures[0].contains("c -> a (c->a)"));
    // Allowed, it passes; allowed where no circle is, the entry is stale.
    assert!(check_circles("files", "KNOWN", &graph, &[("c", "a")]).is_empty());
    let stale = check_circles("files", "KNOWN", &graph, &[("c", "a"), ("d", "a")]);
    assert_eq!(stale.len(), 1, "{stale:?}");
    assert!(stale[0].contains("(\"d\", \"a\")"));
}

#[test]
fn a_crate_with_a_circle_and_an_upward_import_fails() {
    let sources = crate_of(&[
        ("src/lib.rs", "pub mod core;\npub mod net;\n"),
        (
            "src/core/mod.rs",
            "pub mod a;\npub mod b;\npub mod rewrite;\n",
        ),
        ("src/core/a.rs", "use super::b::B;\npub struct A;\n"),
        (
            "src/core/b.rs",
            "/// Made by [`crate::net::Listener`].\npub struct B(crate::core::a::A);\n",
        ),
        (
            "src/net/mod.rs",
            "use crate::core::a::A;\npub struct Listener;\n",
        ),
    ]);
    let tree = Tree::read(&sources);
    assert_eq!(
        edges(&tree),
        [
            ("src/core/a.rs", "src/core/b.rs"),
            ("src/core/b.rs", "src/core/a.rs"),
            ("src/core/b.rs", "src/net/mod.rs"),
            ("src/net/mod.rs", "src/core/a.rs"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let failures = failures(&sources, &tree, &NOTHING_KNOWN);
    let text = failures.join("\n");
    assert!(
        text.contains("circle between files: src/core/a.rs -> src/core/b.rs -> src/core/a.rs"),
        "{text}"
    );
    assert!(
        text.contains("circle between folders: core -> net -> core"),
        "{text}"
    );
    assert!(
        text.contains(
            "core (0) imports net (3): src/core/b.rs -> src/net/mod.rs: `crate::net::Listener`"
        ),
        "{text}"
    );
    // Also: the longer circle through net/mod.rs, and the circle of the files at depth 2 as
    // folders (a file at depth 2 is its own folder there).
    assert!(
        text.contains("circle between folders: core/a -> core/b -> core/a"),
        "{text}"
    );
    assert_eq!(failures.len(), 5, "{text}");
}

#[test]
fn core_and_http1_do_not_import_each_other_and_sizes_are_counted() {
    let big = "fn f() {}\n".repeat(MAX_FILE_LOC + 1);
    let sources = crate_of(&[
        ("src/lib.rs", "pub mod core;\npub mod http1;\n"),
        ("src/core/mod.rs", "pub mod rewrite;\npub struct Framing;\n"),
        ("src/http1/mod.rs", "pub mod big;\npub enum Framing { A }\n"),
        (
            "src/http1/big.rs",
            &format!("// {}\n{big}", "comment lines do not count"),
        ),
    ]);
    let tree = Tree::read(&sources);
    let mut sources = sources;
    let text = failures(&sources, &tree, &NOTHING_KNOWN).join("\n");
    assert!(
        text.contains("src/http1/big.rs: 501 lines of code, over 500"),
        "{text}"
    );
    assert!(text.contains("more than one type named Framing"), "{text}");
    sources.insert(
        "src/core/mod.rs".into(),
        "pub mod rewrite;\nuse crate::http1::Framing;\n".into(),
    );
    let tree = Tree::read(&sources);
    let text = failures(&sources, &tree, &NOTHING_KNOWN).join("\n");
    assert!(text.contains("core (0) imports http1 (0)"), "{text}");
}

#[test]
fn tests_literals_and_comments_are_not_imports() {
    let sources = crate_of(&[
        ("src/lib.rs", "pub mod core;\npub mod net;\n"),
        (
            "src/core/mod.rs",
            "pub mod rewrite;\npub mod a;\n#[cfg(test)]\nmod tests;\n",
        ),
        ("src/core/tests.rs", "use crate::net::X;\n"),
        (
            "src/core/a.rs",
            concat!(
                "// crate::net::X in a comment\n",
                "/* crate::net::X /* nested */ */\n",
                "const S: &str = \"crate::net::X\";\n",
                "const R: &str = r#\"crate::net::\"X\"#;\n",
                "fn f<'a>(c: char) -> bool { c == '\"' || c == '\\'' }\n",
                "#[cfg(test)]\n#[allow(dead_code)]\nfn g() { crate::net::X; }\n",
                "#[cfg(test)]\nmod tests {\n    use crate::net::X;\n}\n",
                "fn h() -> u8 { $crate::net::X }\n",
                "pub(in crate::net) fn i() {}\n",
            ),
        ),
        ("src/net/mod.rs", "pub struct X;\n"),
    ]);
    let tree = Tree::read(&sources);
    assert_eq!(edges(&tree), Vec::<(String, String)>::new());
    assert!(
        tree.files
            .iter()
            .any(|f| f.path == "src/core/tests.rs" && f.test_only)
    );
}

#[test]
fn use_trees_child_modules_and_imports_are_followed() {
    assert_eq!(
        expand_use(" crate::a::{self, b::{C, D as E}, f::*}"),
        vec![
            UseLeaf {
                path: vec!["crate".into(), "a".into()],
                name: Some("a".into())
            },
            UseLeaf {
                path: vec!["crate".into(), "a".into(), "b".into(), "C".into()],
                name: Some("C".into())
            },
            UseLeaf {
                path: vec!["crate".into(), "a".into(), "b".into(), "D".into()],
                name: Some("E".into())
            },
            UseLeaf {
                path: vec!["crate".into(), "a".into(), "f".into()],
                name: None
            },
        ]
    );
    let sources = crate_of(&[
        (
            "src/lib.rs",
            "pub mod core;\npub mod net;\npub use net::X;\n",
        ),
        ("src/core/mod.rs", "pub mod rewrite;\n"),
        (
            "src/net/mod.rs",
            "mod listen;\nmod slots;\npub use slots::X;\nfn f() { listen::go() }\n",
        ),
        ("src/net/listen.rs", "use super::X;\npub fn go() {}\n"),
        ("src/net/slots.rs", "pub struct X;\n"),
    ]);
    let tree = Tree::read(&sources);
    assert_eq!(
        edges(&tree),
        [
            ("src/lib.rs", "src/net/slots.rs"),
            ("src/net/listen.rs", "src/net/slots.rs"),
            ("src/net/mod.rs", "src/net/listen.rs"),
            ("src/net/mod.rs", "src/net/slots.rs"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
}
