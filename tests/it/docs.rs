//! The README and `docs/` against the code, so they cannot drift from it: the configuration
//! reference and `config/toolpulse.toml` against `toolpulse config --defaults`, every event
//! type they name against the events toolpulse emits or forwards, every relative link (and its
//! anchor) and every repository path they mention against the files, and the index against the
//! pages. Each check is also run on a broken input, to show it can fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use toolpulse::config::defaults::{Default, keys};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// The README is a first page, not the manual.
const MAX_README_LINES: usize = 250;

fn repo(path: &str) -> PathBuf {
    Path::new(ROOT).join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The README and every page of `docs/`, by path from the repository's root.
pub(crate) fn documents() -> Vec<(String, String)> {
    let mut docs = vec![("README.md".to_string(), read(&repo("README.md")))];
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    for page in pages {
        let name = format!("docs/{}", page.file_name().expect("name").to_string_lossy());
        docs.push((name, read(&page)));
    }
    docs
}

/// The text outside fenced code blocks.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The index, and the README's size.

#[test]
fn the_readme_is_a_first_page_and_the_index_links_every_page() {
    let readme = read(&repo("README.md"));
    let lines = readme.lines().count();
    assert!(lines <= MAX_README_LINES, "README.md has {lines} lines");
    let index = read(&repo("docs/README.md"));
    let linked = link_targets(&index);
    let pages: Vec<String> = documents()
        .into_iter()
        .filter_map(|(name, _)| name.strip_prefix("docs/").map(str::to_string))
        .filter(|page| page != "README.md")
        .collect();
    assert!(pages.len() >= 12, "{pages:?}");
    let missing = unlinked(&pages, &linked);
    assert!(
        missing.is_empty(),
        "docs/README.md does not link {missing:?}"
    );
    assert!(
        readme.contains("](docs/README.md)"),
        "the README links the index"
    );
    // The check finds a page the index leaves out.
    assert_eq!(unlinked(&["new.md".into()], &linked), ["new.md"]);
}

fn unlinked(pages: &[String], linked: &BTreeSet<String>) -> Vec<String> {
    pages
        .iter()
        .filter(|page| !linked.contains(*page))
        .cloned()
        .collect()
}

/// The files the Markdown links of `text` point at (without anchors).
fn link_targets(text: &str) -> BTreeSet<String> {
    links(text)
        .into_iter()
        .map(|l| l.split('#').next().unwrap_or_default().to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The configuration reference.

/// `toolpulse config --defaults`, as the binary prints it.
fn printed_defaults() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .args(["config", "--defaults"])
        .output()
        .expect("run toolpulse");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn the_configuration_reference_is_what_config_defaults_prints() {
    let printed = printed_defaults();
    let page = read(&repo("docs/configuration.md"));
    let block = format!("```toml\n{printed}```\n");
    assert!(
        page.contains(&block),
        "docs/configuration.md must hold `toolpulse config --defaults`'s output as it is:\n{printed}"
    );
    // Every key is in it, with its default.
    for key in keys() {
        let line = match &key.value {
            Default::Value(value) => format!("\n{} = {value}\n", key.name),
            Default::Unset(example) => format!("\n# {} = {example}\n", key.name),
            Default::Table(_) => format!("\n# [{}.{}]\n", key.section, key.name),
        };
        assert!(printed.contains(&line), "{key:?}");
    }
}

/// A config file's keys as written, commented out or not: (section, key) → value. A table of
/// names the user picks (`[failure.kinds]`) is the key `kinds` of `[failure]`, its entries
/// left out.
fn written_keys(text: &str) -> BTreeMap<(String, String), String> {
    let sections: BTreeSet<&str> = keys().iter().map(|k| k.section).collect();
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    let header = regex::Regex::new(r"^\[\[?[a-z_.]+\]\]?$").expect("re");
    let mut found = BTreeMap::new();
    let mut section = String::new();
    for line in text.lines() {
        let line = line.strip_prefix("# ").unwrap_or(line).trim_end();
        if header.is_match(line) {
            let name = line.trim_matches(['[', ']']).to_string();
            if !sections.contains(name.as_str())
                && let Some((parent, key)) = name.rsplit_once('.')
            {
                found.insert((parent.to_string(), key.to_string()), String::new());
            }
            section = name;
            continue;
        }
        let Some((key, value)) = line.split_once(" = ") else {
            continue;
        };
        if ident(key) && sections.contains(section.as_str()) {
            found.insert((section.clone(), key.to_string()), value.to_string());
        }
    }
    found
}

/// What `file` says that the defaults do not: keys missing or unknown, defaults differing.
fn disagreements(file: &str) -> Vec<String> {
    let written = written_keys(file);
    let mut wrong = Vec::new();
    let keys = keys();
    for key in &keys {
        let at = (key.section.to_string(), key.name.to_string());
        match (written.get(&at), &key.value) {
            (None, _) => wrong.push(format!("[{}] {} is missing", key.section, key.name)),
            (Some(value), Default::Value(default)) if value != default => wrong.push(format!(
                "[{}] {} = {value}, but its default is {default}",
                key.section, key.name
            )),
            _ => {}
        }
    }
    for (section, name) in written.keys() {
        if !keys.iter().any(|k| k.section == section && k.name == name) {
            wrong.push(format!("[{section}] {name} is not a key of the config"));
        }
    }
    wrong
}

#[test]
fn config_toolpulse_toml_lists_every_key_with_its_default() {
    let file = read(&repo("config/toolpulse.toml"));
    let wrong = disagreements(&file);
    assert!(wrong.is_empty(), "config/toolpulse.toml: {wrong:#?}");
    // A changed default, a key left out and a key that does not exist are each found.
    let broken = file
        .replace("interval_ms = 10000", "interval_ms = 5000")
        .replace("max_open_calls = 256\n", "")
        .replace(
            "preserve_host = false",
            "preserve_host = false\nkeep_alive = true",
        );
    assert_eq!(
        disagreements(&broken).len(),
        3,
        "{:#?}",
        disagreements(&broken)
    );
}

// ---------------------------------------------------------------------------------------------
// Event types.

/// The event types toolpulse emits or forwards: each type in the recorded and scripted
/// upstream streams and in the expected outputs under `tests/fixtures/` (which the fixture
/// tests hold the code to), the types the Responses dialect names, and each type with a JSON Schema in `docs/schemas/` (which the
/// schema tests hold every injected event to).
fn known_event_types() -> BTreeSet<String> {
    let mut known = BTreeSet::new();
    let mut dirs = vec![repo("tests/fixtures")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("fixtures") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "sse") {
                let text =
                    String::from_utf8_lossy(&std::fs::read(&path).expect("read")).into_owned();
                known.extend(event_types_in_stream(&text));
            }
        }
    }
    // The Responses events whose meaning the code knows, forwarded whether or not a fixture
    // has them.
    let dialect = toolpulse::core::dialect::responses::TERMINAL_TYPES.iter();
    let dialect = dialect.chain(toolpulse::core::dialect::responses::LISTS_OUTPUT);
    known.extend(dialect.map(|kind| kind.to_string()));
    for entry in std::fs::read_dir(repo("docs/schemas")).expect("schemas") {
        let name = entry
            .expect("entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if let Some(kind) = name.strip_suffix(".schema.json") {
            known.insert(kind.to_string());
        }
    }
    known
}

fn event_types_in_stream(text: &str) -> BTreeSet<String> {
    let kind =
        regex::Regex::new(r#"(?m)^event: ?(\S+)|"type":"(response\.[a-z_.]+|error)""#).expect("re");
    kind.captures_iter(text)
        .filter_map(|c| c.get(1).or(c.get(2)))
        .map(|m| m.as_str().to_string())
        .collect()
}

/// Names beginning `response.` that are fields or code, not events.
const NOT_EVENTS: [&str; 6] = [
    "response.output",
    "response.status",
    "response.status_code",
    "response.status_mut",
    "response.into_body",
    "response.error",
];

/// The Responses event types `text` names: `response.…` outside other dotted names, not a
/// wildcard (`response.mcp_call.*`).
fn named_event_types(text: &str) -> BTreeSet<String> {
    let name = regex::Regex::new(r"response\.[a-z_]+(?:\.[a-z_]+)*").expect("re");
    let mut found = BTreeSet::new();
    for m in name.find_iter(text) {
        let before = text[..m.start()].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '.' || c == '_') {
            continue;
        }
        let after = &text[m.end()..];
        if after.starts_with(".*") || after.starts_with(".{") || after.starts_with(".<") {
            continue;
        }
        if !NOT_EVENTS.contains(&m.as_str()) {
            found.insert(m.as_str().to_string());
        }
    }
    found
}

#[test]
fn every_event_type_the_docs_name_is_one_toolpulse_emits_or_forwards() {
    let known = known_event_types();
    for expected in [
        "response.web_search_call.searching",
        "response.mcp_call.in_progress",
        "response.mcp_call_arguments.delta",
        "response.output_text.delta",
        "tool.stage",
    ] {
        assert!(
            known.contains(expected),
            "{expected} should be known: {known:?}"
        );
    }
    let mut texts = documents();
    for config in [
        "config/toolpulse.toml",
        "config/antwort.toml",
        "config/litellm.toml",
    ] {
        texts.push((config.to_string(), read(&repo(config))));
    }
    let mut unknown = Vec::new();
    let mut named = 0;
    for (name, text) in &texts {
        for kind in named_event_types(text) {
            named += 1;
            if !known.contains(&kind) {
                unknown.push(format!("{name}: {kind}"));
            }
        }
    }
    assert!(named > 50, "event types were found: {named}");
    assert!(
        unknown.is_empty(),
        "event types toolpulse never sends: {unknown:#?}"
    );
    // The one an earlier config comment named is caught.
    let stale = named_event_types("progress  response.tool_call.progress events");
    assert!(stale.iter().any(|k| !known.contains(k)), "{stale:?}");
}

// ---------------------------------------------------------------------------------------------
// Links and paths.

/// The targets of the Markdown links (`[text](target)`) outside code blocks, but for links to
/// other sites.
fn links(text: &str) -> Vec<String> {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").expect("re");
    link.captures_iter(&prose(text))
        .map(|c| c[1].to_string())
        .filter(|t| !t.contains("://") && !t.starts_with("mailto:"))
        .collect()
}

/// GitHub's anchor for a heading: lower case, spaces as `-`, punctuation other than `-` and
/// `_` left out.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut all = BTreeSet::new();
    for line in prose(text).lines() {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let base = anchor(heading.trim_start_matches('#'));
        let count = seen.entry(base.clone()).or_default();
        all.insert(match *count {
            0 => base.clone(),
            n => format!("{base}-{n}"),
        });
        *count += 1;
    }
    all
}

/// What is wrong with the links of the document `name` (a path from the root) and the
/// repository paths it mentions.
fn broken_links(name: &str, text: &str) -> Vec<String> {
    let dir = Path::new(name).parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for target in links(text) {
        let (path, fragment) = match target.split_once('#') {
            Some((path, fragment)) => (path, Some(fragment)),
            None => (target.as_str(), None),
        };
        let file = if path.is_empty() {
            Path::new(name).to_path_buf()
        } else {
            normalize(&dir.join(path))
        };
        if !repo(&file.to_string_lossy()).exists() {
            broken.push(format!("{name}: ({target}): no {}", file.display()));
            continue;
        }
        if let Some(fragment) = fragment
            && file.extension().is_some_and(|e| e == "md")
        {
            let target_text = read(&repo(&file.to_string_lossy()));
            if !anchors(&target_text).contains(fragment) {
                broken.push(format!("{name}: ({target}): no heading #{fragment}"));
            }
        }
    }
    let mentioned = regex::Regex::new(r"(?:^|[\s`(\[])((?:src|tests|config|examples|deploy|oracle|fuzz|sdk-tests|browser-tests)/[A-Za-z0-9_./-]*)")
        .expect("re");
    for path in mentioned.captures_iter(text) {
        let path = path[1].trim_end_matches(['.', ',', ':', ';']);
        if !repo(path).exists() {
            broken.push(format!("{name}: {path} does not exist"));
        }
    }
    broken
}

/// `a/../b` as `b`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn every_relative_link_anchor_and_repository_path_exists() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for (name, text) in documents() {
        checked += links(&text).len();
        broken.extend(broken_links(&name, &text));
    }
    assert!(checked > 40, "links were found: {checked}");
    assert!(broken.is_empty(), "{broken:#?}");
    // A missing file, a missing heading and a path that moved are each found.
    let bad = "[a](nothing.md) [b](profiles.md#no-such-heading) see `src/invariants.rs`.\n";
    assert_eq!(
        broken_links("docs/x.md", bad).len(),
        3,
        "{:#?}",
        broken_links("docs/x.md", bad)
    );
}

#[test]
fn no_document_outside_the_repository_is_cited() {
    let cited =
        regex::Regex::new(r"PRODUCT\.md|\bseeds? 0\d\d|\bspec 0\d\d|[Ii]ssue \d+").expect("re");
    let mut found = Vec::new();
    for (name, text) in documents() {
        found.extend(
            cited
                .find_iter(&text)
                .map(|m| format!("{name}: {}", m.as_str())),
        );
    }
    assert!(found.is_empty(), "{found:#?}");
    assert!(cited.is_match("as PRODUCT.md §2 says"));
}
