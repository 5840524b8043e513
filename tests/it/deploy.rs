//! The deployment files, checked against the repo and the binary without Docker or a cluster:
//! every YAML document under deploy/ parses; the Kubernetes manifests and the compose file agree
//! with each other, with the Dockerfile and with the config they ship; every Dockerfile COPY
//! source exists and is in the build context; the image's ENTRYPOINT flags and HEALTHCHECK are
//! run against the real binary on loopback ports, and it stops cleanly on SIGTERM.
//! (deploy/check-dockerfile.sh runs the Dockerfile's build itself.)

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use yaml_rust2::{Yaml, YamlLoader};

use crate::common;
use common::redis_server::RedisServer;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
/// How long the binary may take to log that it listens.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long it may take to exit after SIGTERM with no stream in flight, or to answer a probe.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);

fn repo(path: &str) -> PathBuf {
    Path::new(ROOT).join(path.trim_start_matches('/'))
}

fn read_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------------
// The Dockerfile, read the way the builder reads it.

struct Instruction {
    stage: usize,
    keyword: String,
    args: String,
}

struct Dockerfile {
    instructions: Vec<Instruction>,
    /// Per stage: its base image (ARG defaults substituted) and its name.
    stages: Vec<(String, String)>,
}

/// A COPY line: `--from` stage, sources, destination.
struct Copy {
    from: Option<String>,
    sources: Vec<String>,
    dest: String,
}

impl Dockerfile {
    fn load() -> Dockerfile {
        let text = read_text(&repo("Dockerfile"));
        let mut instructions = Vec::new();
        let mut stages = Vec::new();
        let mut build_args = BTreeMap::new();
        let mut joined = String::new();
        for line in text.lines() {
            if line.trim_start().starts_with('#') {
                continue;
            }
            if let Some(head) = line.strip_suffix('\\') {
                joined.push_str(head);
                joined.push(' ');
                continue;
            }
            joined.push_str(line);
            let instruction = std::mem::take(&mut joined);
            let Some((keyword, args)) = instruction.trim().split_once(' ') else {
                continue;
            };
            let (keyword, args) = (keyword.to_ascii_uppercase(), args.trim().to_string());
            match keyword.as_str() {
                "ARG" if stages.is_empty() => {
                    let (name, value) = args.split_once('=').unwrap_or((&args, ""));
                    build_args.insert(format!("${{{name}}}"), value.to_string());
                }
                "FROM" => {
                    let words: Vec<&str> = args.split_whitespace().collect();
                    let mut image = words[0].to_string();
                    for (name, value) in &build_args {
                        image = image.replace(name.as_str(), value);
                    }
                    let name = words.get(2).map_or(String::new(), |n| n.to_string());
                    stages.push((image, name));
                }
                _ => {}
            }
            let stage = stages.len().saturating_sub(1);
            instructions.push(Instruction {
                stage,
                keyword,
                args,
            });
        }
        assert!(stages.len() >= 2, "a multi-stage Dockerfile");
        Dockerfile {
            instructions,
            stages,
        }
    }

    fn runtime(&self) -> usize {
        self.stages.len() - 1
    }

    fn stage_named(&self, name: &str) -> usize {
        let found = self.stages.iter().position(|(_, n)| n == name);
        found.unwrap_or_else(|| panic!("no stage named {name}"))
    }

    fn all(&self, stage: usize, keyword: &'static str) -> impl Iterator<Item = &str> {
        self.instructions
            .iter()
            .filter(move |i| i.stage == stage && i.keyword == keyword)
            .map(|i| i.args.as_str())
    }

    /// The stage's last `keyword` instruction (the one in effect).
    fn last(&self, stage: usize, keyword: &'static str) -> &str {
        let last = self.all(stage, keyword).last();
        last.unwrap_or_else(|| panic!("stage {stage} has no {keyword}"))
    }

    fn copies(&self, stage: usize) -> Vec<Copy> {
        let copy = |args: &str| {
            let mut words: Vec<String> = args.split_whitespace().map(String::from).collect();
            let from = words
                .iter()
                .find_map(|w| w.strip_prefix("--from=").map(String::from));
            words.retain(|w| !w.starts_with("--"));
            let dest = words.pop().expect("COPY has a destination");
            Copy {
                from,
                sources: words,
                dest,
            }
        };
        self.all(stage, "COPY").map(copy).collect()
    }

    /// `ENV NAME=value` of the runtime stage.
    fn env(&self, name: &str) -> String {
        let runtime = self.all(self.runtime(), "ENV");
        let value = runtime
            .filter_map(|a| a.strip_prefix(name)?.strip_prefix('='))
            .last();
        value.unwrap_or_else(|| panic!("no ENV {name}")).to_string()
    }

    fn entrypoint(&self) -> Vec<String> {
        json_words(self.last(self.runtime(), "ENTRYPOINT"))
    }

    fn healthcheck(&self) -> Vec<String> {
        let args = self.last(self.runtime(), "HEALTHCHECK");
        let (_, command) = args.split_once("CMD ").expect("HEALTHCHECK CMD [...]");
        json_words(command)
    }

    /// Where a file of the runtime image comes from: a repo path (`Ok`) or `Err((stage, path))`.
    fn origin(&self, image_path: &str) -> Result<String, (String, String)> {
        let copies = self.copies(self.runtime());
        let copy = copies.iter().rev().find_map(|c| {
            let rest = match c.dest.strip_suffix('/') {
                Some(dir) => image_path.strip_prefix(dir)?.strip_prefix('/')?,
                None if c.dest == image_path => "",
                None => return None,
            };
            let source = c.sources.last().expect("COPY has a source");
            let source = match rest {
                "" => source.clone(),
                rest => format!("{}/{rest}", source.trim_end_matches('/')),
            };
            Some((c.from.clone(), source))
        });
        match copy.unwrap_or_else(|| panic!("no COPY puts {image_path} in the image")) {
            (None, source) => Ok(source),
            (Some(stage), source) => Err((stage, source)),
        }
    }
}

fn json_words(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not an exec-form array: {text}: {e}"))
}

/// The value after `flag` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args.iter().position(|a| a == flag);
    let value = at.and_then(|i| args.get(i + 1));
    value.unwrap_or_else(|| panic!("{flag} VALUE in {args:?}"))
}

fn port_of(address: &str) -> u16 {
    let address: SocketAddr = address.parse().expect("an address like 0.0.0.0:8080");
    address.port()
}

/// Whether `.dockerignore` lets `path` (relative to the repo) into the build context: its last
/// pattern that matches the path or one of its parent directories decides.
fn in_build_context(path: &str) -> bool {
    let text = read_text(&repo(".dockerignore"));
    let mut included = true;
    for pattern in text.lines().map(str::trim) {
        if pattern.is_empty() || pattern.starts_with('#') {
            continue;
        }
        let (include, pattern) = match pattern.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, pattern),
        };
        let pattern = pattern.trim_matches('/');
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .expect("a .dockerignore pattern")
            .compile_matcher();
        let mut prefix = Path::new(path);
        let matched = loop {
            if glob.is_match(prefix) {
                break true;
            }
            match prefix.parent() {
                Some(parent) if parent != Path::new("") => prefix = parent,
                _ => break false,
            }
        };
        if matched {
            included = include;
        }
    }
    included
}

fn files_under(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let entries = std::fs::read_dir(path).expect("read dir");
        for entry in entries {
            files_under(&entry.expect("dir entry").path(), out);
        }
    } else {
        out.push(path.to_path_buf());
    }
}

/// The Debian release an image tag names (`rust:1-slim-bookworm`, `debian:bookworm-slim`).
fn debian_release(image: &str) -> &'static str {
    let found = ["bullseye", "bookworm", "trixie"]
        .into_iter()
        .find(|release| image.contains(release));
    found.unwrap_or_else(|| panic!("{image} names no Debian release"))
}

#[test]
fn dockerfile_copies_and_builds_what_the_repo_has() {
    let docker = Dockerfile::load();
    let build = docker.stage_named("build");
    let (build_image, _) = &docker.stages[build];
    let (runtime_image, _) = &docker.stages[docker.runtime()];
    assert!(build_image.starts_with("rust:"), "{build_image}");
    assert!(runtime_image.starts_with("debian:"), "{runtime_image}");
    assert_eq!(
        debian_release(build_image),
        debian_release(runtime_image),
        "the binary links the build image's glibc"
    );

    for stage in 0..docker.stages.len() {
        for copy in docker.copies(stage).iter().filter(|c| c.from.is_none()) {
            for source in &copy.sources {
                let path = repo(source);
                assert!(path.exists(), "COPY {source}: not in the repo");
                let mut files = Vec::new();
                files_under(&path, &mut files);
                for file in files {
                    let relative = file.strip_prefix(ROOT).expect("under the repo");
                    let relative = relative.to_str().expect("utf-8 path");
                    assert!(
                        in_build_context(relative),
                        "{relative}: left out by .dockerignore"
                    );
                }
            }
        }
    }

    let runs: Vec<&str> = docker.all(build, "RUN").collect();
    let builds: Vec<(usize, &str)> = runs
        .iter()
        .enumerate()
        .flat_map(|(i, run)| run.split("&&").map(move |command| (i, command.trim())))
        .filter(|(_, command)| command.contains("cargo build"))
        .collect();
    assert!(!builds.is_empty(), "the build stage runs cargo build");
    for (_, command) in &builds {
        assert_eq!(*command, "cargo build --release --locked");
    }
    // The placeholder build must give cargo every target file the manifest names.
    let manifest: toml::Table = read_text(&repo("Cargo.toml")).parse().expect("Cargo.toml");
    let benches = manifest.get("bench").and_then(|b| b.as_array());
    let placeholder = runs[builds[0].0];
    for bench in benches.into_iter().flatten() {
        let name = bench["name"].as_str().expect("bench name");
        let path = bench.get("path").and_then(|p| p.as_str());
        let path = path.map_or(format!("benches/{name}.rs"), String::from);
        assert!(placeholder.contains(&path), "no placeholder {path}");
    }

    let runtime = docker.runtime();
    let packages = docker.all(runtime, "RUN").collect::<Vec<_>>().join(" ");
    assert!(
        packages.contains("ca-certificates"),
        "https upstreams need the roots"
    );
    let user = docker.last(runtime, "USER");
    let uid: u32 = user
        .split(':')
        .next()
        .and_then(|u| u.parse().ok())
        .expect("numeric USER");
    assert_ne!(uid, 0, "not root");
    assert_eq!(docker.last(runtime, "STOPSIGNAL"), "SIGTERM");

    let entrypoint = docker.entrypoint();
    let proxy_port = port_of(flag(&entrypoint, "--listen"));
    let admin_port = port_of(flag(&entrypoint, "--admin-listen"));
    let exposed: Vec<u16> = docker
        .last(runtime, "EXPOSE")
        .split_whitespace()
        .map(|p| p.parse().expect("EXPOSE port"))
        .collect();
    let mcp_port = port_of(toolpulse::config::mcp::DEFAULT_MCP_LISTEN);
    assert_eq!(exposed, [proxy_port, admin_port, mcp_port]);
    let health = docker.healthcheck();
    assert_eq!(health[..2], ["toolpulse", "health"]);
    assert_eq!(port_of(flag(&health, "--admin")), admin_port);
}

#[test]
fn the_image_layout_matches_its_copy_lines() {
    let docker = Dockerfile::load();
    let program = &docker.entrypoint()[0];
    assert_eq!(program, &docker.healthcheck()[0]);
    // On the image's PATH (debian's), so both the ENTRYPOINT and HEALTHCHECK find it.
    let binary = format!("/usr/local/bin/{program}");
    let (stage, built) = docker
        .origin(&binary)
        .expect_err("built, not from the repo");
    let build = docker.stage_named(&stage);
    let manifest: toml::Table = read_text(&repo("Cargo.toml")).parse().expect("Cargo.toml");
    let package = manifest["package"]["name"].as_str().expect("package name");
    assert_eq!(program, package, "the binary is named after the package");
    let workdir = docker.last(build, "WORKDIR").trim_end_matches('/');
    assert_eq!(built, format!("{workdir}/target/release/{package}"));

    let config = docker.env("TOOLPULSE_CONFIG");
    assert_eq!(config, "/etc/toolpulse/toolpulse.toml");
    let source = docker
        .origin(&config)
        .expect("the config comes from the repo");
    let text = read_text(&repo(&source));
    toolpulse::Config::from_toml_str(&text).expect("the image's config is valid");
}

// ---------------------------------------------------------------------------------------------
// YAML.

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    files_under(dir, &mut files);
    files.retain(|f| matches!(f.extension().and_then(|e| e.to_str()), Some("yml" | "yaml")));
    files.sort();
    files
}

fn load_yaml(path: &Path) -> Vec<Yaml> {
    let docs = YamlLoader::load_from_str(&read_text(path))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(!docs.is_empty(), "{}: no document", path.display());
    docs
}

fn text<'a>(value: &'a Yaml, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what}: not a string: {value:?}"))
}

fn int(value: &Yaml, what: &str) -> i64 {
    value
        .as_i64()
        .unwrap_or_else(|| panic!("{what}: not an integer: {value:?}"))
}

fn list<'a>(value: &'a Yaml, what: &str) -> &'a [Yaml] {
    value
        .as_vec()
        .unwrap_or_else(|| panic!("{what}: not a list: {value:?}"))
}

/// Every label of `selector` is among `labels`.
fn selects(selector: &Yaml, labels: &Yaml) -> bool {
    let selector = selector.as_hash().expect("a label map");
    !selector.is_empty() && selector.iter().all(|(k, v)| &labels[text(k, "label")] == v)
}

#[test]
fn every_yaml_document_under_deploy_parses() {
    let files = yaml_files(&repo("deploy"));
    assert!(files.len() >= 7, "{files:?}");
    for file in files {
        for doc in load_yaml(&file) {
            assert!(doc.as_hash().is_some(), "{}: not a mapping", file.display());
        }
    }
}

/// The Kubernetes objects under deploy/kubernetes named `name` (and the Kustomization), by
/// kind: `toolpulse`'s own, or `toolpulse-redis`'s (the progress bus).
fn kubernetes_named(name: &str) -> BTreeMap<String, Yaml> {
    let mut objects = BTreeMap::new();
    for file in yaml_files(&repo("deploy/kubernetes")) {
        for doc in load_yaml(&file) {
            assert!(doc["apiVersion"].as_str().is_some(), "{}", file.display());
            let kind = text(&doc["kind"], "kind").to_string();
            if kind != "Kustomization" {
                let named = text(&doc["metadata"]["name"], "name");
                assert!(["toolpulse", "toolpulse-redis"].contains(&named), "{named}");
                if named != name {
                    continue;
                }
            }
            let previous = objects.insert(kind.clone(), doc);
            assert!(previous.is_none(), "two {kind}s");
        }
    }
    objects
}

fn kubernetes() -> BTreeMap<String, Yaml> {
    kubernetes_named("toolpulse")
}

/// A `[progress] token` for configs that need one (as the pod's Secret gives it).
const TOKEN: &str = "a-token-of-16-chars";

/// The ConfigMap's config file, its name and the config parsed with [`TOKEN`] as the
/// environment's token: its MCP listener is not on loopback, so it needs one.
fn configmap_config(objects: &BTreeMap<String, Yaml>) -> (String, String, toolpulse::Config) {
    let data = objects["ConfigMap"]["data"]
        .as_hash()
        .expect("ConfigMap data");
    assert_eq!(data.len(), 1, "one config file");
    let (name, text) = data.iter().next().expect("one entry");
    let (name, text) = (self::text(name, "key"), self::text(text, "toolpulse.toml"));
    let config =
        toolpulse::Config::from_toml_with_token(text, Some(TOKEN)).expect("the ConfigMap's config");
    (name.to_string(), text.to_string(), config)
}

#[test]
fn kubernetes_manifests_fit_together() {
    let docker = Dockerfile::load();
    let objects = kubernetes();
    let kinds: Vec<&str> = objects.keys().map(String::as_str).collect();
    for kind in [
        "ConfigMap",
        "Deployment",
        "HorizontalPodAutoscaler",
        "NetworkPolicy",
        "Service",
    ] {
        assert!(kinds.contains(&kind), "no {kind} in {kinds:?}");
    }
    let kustomization = &objects["Kustomization"];
    let mut listed: Vec<PathBuf> = list(&kustomization["resources"], "resources")
        .iter()
        .map(|r| repo("deploy/kubernetes").join(text(r, "resource")))
        .collect();
    listed.sort();
    let mut files = yaml_files(&repo("deploy/kubernetes"));
    files.retain(|f| !f.ends_with("kustomization.yaml"));
    assert_eq!(listed, files, "kustomization.yaml lists every manifest");

    let (config_name, _, config) = configmap_config(&objects);
    assert!(
        config.proxy.upstream.is_some(),
        "the ConfigMap names the gateway"
    );

    let deployment = &objects["Deployment"];
    assert_eq!(int(&deployment["spec"]["replicas"], "replicas"), 2);
    let template = &deployment["spec"]["template"];
    let labels = &template["metadata"]["labels"];
    assert!(selects(
        &deployment["spec"]["selector"]["matchLabels"],
        labels
    ));
    let pod = &template["spec"];
    let containers = list(&pod["containers"], "containers");
    assert_eq!(containers.len(), 1);
    let container = &containers[0];

    // Ports: named in the pod, bound by the image's entrypoint flags and the ConfigMap.
    let ports = list(&container["ports"], "ports");
    let port_named = |name: &str| {
        let port = ports.iter().find(|p| p["name"].as_str() == Some(name));
        int(
            &port.unwrap_or_else(|| panic!("no port {name}"))["containerPort"],
            name,
        )
    };
    let resolve = |port: &Yaml| match port {
        Yaml::String(name) => port_named(name),
        port => int(port, "port"),
    };
    let entrypoint = docker.entrypoint();
    let http = port_named("http");
    let admin = port_named("admin");
    assert_eq!(http, i64::from(port_of(flag(&entrypoint, "--listen"))));
    assert_eq!(
        admin,
        i64::from(port_of(flag(&entrypoint, "--admin-listen")))
    );
    assert_eq!(http, i64::from(config.proxy.listen.port()));
    assert_eq!(admin, i64::from(config.admin.listen.port()));

    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &container[probe]["httpGet"];
        assert_eq!(text(&get["path"], probe), path);
        assert_eq!(resolve(&get["port"]), admin, "{probe} on the admin port");
    }

    // Termination: the preStop pause, then the drain, must end before the kubelet's SIGKILL.
    let grace = int(&pod["terminationGracePeriodSeconds"], "grace");
    let pause = match &container["lifecycle"]["preStop"]["exec"]["command"] {
        Yaml::BadValue => 0,
        command => {
            let command = list(command, "preStop");
            assert_eq!(text(&command[0], "preStop"), "sleep");
            text(&command[1], "seconds").parse().expect("sleep seconds")
        }
    };
    let drain = config.proxy.drain_timeout.as_secs_f64();
    assert!(
        grace as f64 > pause as f64 + drain,
        "terminationGracePeriodSeconds {grace} <= preStop {pause} s + drain {drain} s"
    );

    // Security: the image's numeric user, nothing written to the image.
    let uid: i64 = docker
        .last(docker.runtime(), "USER")
        .split(':')
        .next()
        .expect("uid")
        .parse()
        .expect("numeric uid");
    let security = &pod["securityContext"];
    assert_eq!(security["runAsNonRoot"].as_bool(), Some(true));
    assert_eq!(int(&security["runAsUser"], "runAsUser"), uid);
    let container_security = &container["securityContext"];
    assert_eq!(
        container_security["readOnlyRootFilesystem"].as_bool(),
        Some(true)
    );
    assert_eq!(
        container_security["allowPrivilegeEscalation"].as_bool(),
        Some(false)
    );
    for bound in ["requests", "limits"] {
        for resource in ["cpu", "memory"] {
            let value = &container["resources"][bound][resource];
            assert!(!value.is_badvalue(), "resources.{bound}.{resource}");
        }
    }

    // The ConfigMap is mounted where the image's TOOLPULSE_CONFIG points.
    let image_config = docker.env("TOOLPULSE_CONFIG");
    let mounts = list(&container["volumeMounts"], "volumeMounts");
    let volumes = list(&pod["volumes"], "volumes");
    let mounted = mounts.iter().any(|mount| {
        let dir = text(&mount["mountPath"], "mountPath");
        let volume = volumes.iter().find(|v| v["name"] == mount["name"]);
        let configmap = volume.map(|v| &v["configMap"]["name"]);
        image_config == format!("{}/{config_name}", dir.trim_end_matches('/'))
            && configmap == Some(&objects["ConfigMap"]["metadata"]["name"])
    });
    assert!(mounted, "the ConfigMap is not mounted at {image_config}");

    let service = &objects["Service"];
    assert!(selects(&service["spec"]["selector"], labels));
    let service_ports = list(&service["spec"]["ports"], "Service ports");
    let targets: Vec<i64> = service_ports
        .iter()
        .map(|p| resolve(&p["targetPort"]))
        .collect();
    assert!(
        targets.contains(&http),
        "the Service reaches the proxy port"
    );

    let hpa = &objects["HorizontalPodAutoscaler"];
    assert_eq!(text(&hpa["apiVersion"], "apiVersion"), "autoscaling/v2");
    let target = &hpa["spec"]["scaleTargetRef"];
    assert_eq!(target["kind"], deployment["kind"]);
    assert_eq!(target["name"], deployment["metadata"]["name"]);
    let metrics = list(&hpa["spec"]["metrics"], "HPA metrics");
    assert!(
        metrics
            .iter()
            .any(|m| m["resource"]["name"].as_str() == Some("cpu"))
    );
    assert!(
        int(&hpa["spec"]["minReplicas"], "minReplicas") <= 2,
        "the HPA may keep the Deployment's replicas"
    );
    if let Some(pdb) = objects.get("PodDisruptionBudget") {
        assert!(selects(&pdb["spec"]["selector"]["matchLabels"], labels));
    }
}

#[test]
fn kubernetes_runs_the_mcp_front_for_the_gateway_only() {
    let docker = Dockerfile::load();
    let objects = kubernetes();
    let (_, toml, config) = configmap_config(&objects);
    assert!(
        toolpulse::Config::from_toml_str(&toml).is_err(),
        "the MCP listener is not on loopback: without the token toolpulse refuses to start"
    );
    let mcp = config
        .mcp
        .as_ref()
        .expect("the ConfigMap has an [mcp] section");
    assert!(mcp.listen.ip().is_unspecified(), "{}", mcp.listen);
    assert!(!mcp.servers.is_empty(), "an MCP server behind the front");

    // The pod's port `mcp` is the one [mcp] listens on, the image's default and EXPOSEd one.
    let template = &objects["Deployment"]["spec"]["template"];
    let labels = &template["metadata"]["labels"];
    let container = &template["spec"]["containers"][0];
    let ports = list(&container["ports"], "ports");
    let mcp_port = ports
        .iter()
        .find(|p| p["name"].as_str() == Some("mcp"))
        .expect("a container port named mcp");
    assert_eq!(
        int(&mcp_port["containerPort"], "mcp"),
        i64::from(mcp.listen.port())
    );
    assert_eq!(
        mcp.listen.port(),
        port_of(toolpulse::config::mcp::DEFAULT_MCP_LISTEN)
    );
    let exposed = docker.last(docker.runtime(), "EXPOSE");
    assert!(
        exposed
            .split_whitespace()
            .any(|p| p == mcp.listen.port().to_string()),
        "EXPOSE {exposed}"
    );

    // The token comes from a Secret, never from a literal in a manifest.
    let env = list(&container["env"], "env");
    let token = env
        .iter()
        .find(|e| e["name"].as_str() == Some(toolpulse::config::PROGRESS_TOKEN_ENV))
        .expect("TOOLPULSE_PROGRESS_TOKEN in the container's env");
    assert!(token["value"].is_badvalue(), "a literal token: {token:?}");
    let secret = &token["valueFrom"]["secretKeyRef"];
    assert!(!text(&secret["name"], "secret name").is_empty());
    assert!(!text(&secret["key"], "secret key").is_empty());
    assert_ne!(
        secret["optional"].as_bool(),
        Some(true),
        "the pod must not start without it"
    );

    // The Service reaches it, so the gateway can use http://toolpulse:<port>/<name>.
    let service_ports = list(&objects["Service"]["spec"]["ports"], "Service ports");
    let service_port = service_ports
        .iter()
        .find(|p| p["targetPort"].as_str() == Some("mcp"))
        .expect("a Service port targeting mcp");
    assert_eq!(
        int(&service_port["port"], "port"),
        i64::from(mcp.listen.port())
    );
    let service_text = read_text(&repo("deploy/kubernetes/service.yaml"));
    let url = format!(
        "http://{}:{}/<",
        text(&objects["Service"]["metadata"]["name"], "name"),
        mcp.listen.port()
    );
    assert!(
        service_text.contains(&url),
        "service.yaml tells the gateway {url}name>"
    );

    // The NetworkPolicy lets only selected pods reach the MCP port.
    let policy = &objects["NetworkPolicy"];
    assert!(selects(
        &policy["spec"]["podSelector"]["matchLabels"],
        labels
    ));
    let types: Vec<&str> = list(&policy["spec"]["policyTypes"], "policyTypes")
        .iter()
        .map(|t| text(t, "policyType"))
        .collect();
    assert!(types.contains(&"Ingress"), "{types:?}");
    let is_mcp = |port: &Yaml| match port {
        Yaml::String(name) => name == "mcp",
        port => int(port, "port") == i64::from(mcp.listen.port()),
    };
    let mut open = Vec::new();
    for rule in list(&policy["spec"]["ingress"], "ingress") {
        // A rule without ports would open every port, the MCP one included.
        let ports = list(&rule["ports"], "a rule's ports");
        let names: Vec<&Yaml> = ports.iter().map(|p| &p["port"]).collect();
        if names.iter().any(|p| is_mcp(p)) {
            let from = list(&rule["from"], "who may reach the MCP port");
            assert!(!from.is_empty());
            for peer in from {
                let selector = peer["podSelector"]["matchLabels"].as_hash();
                assert!(
                    selector.is_some_and(|s| !s.is_empty()) && peer["ipBlock"].is_badvalue(),
                    "the MCP port is for selected pods only: {peer:?}"
                );
            }
        } else {
            open.extend(names.into_iter().cloned());
        }
    }
    assert!(
        open.contains(&Yaml::String("http".into())),
        "clients reach the proxy: {open:?}"
    );
}

#[test]
fn compose_puts_toolpulse_in_front_of_the_gateway() {
    let docker = Dockerfile::load();
    let path = repo("deploy/docker-compose.yml");
    let compose = &load_yaml(&path)[0];
    let services = compose["services"].as_hash().expect("services");
    let toolpulse = &compose["services"]["toolpulse"];

    let context = path
        .parent()
        .expect("deploy/")
        .join(text(&toolpulse["build"]["context"], "context"));
    let dockerfile = context.join(text(&toolpulse["build"]["dockerfile"], "dockerfile"));
    assert_eq!(
        dockerfile.canonicalize().expect("the build's Dockerfile"),
        repo("Dockerfile").canonicalize().expect("Dockerfile")
    );

    let command: Vec<String> = list(&toolpulse["command"], "command")
        .iter()
        .map(|w| text(w, "command").to_string())
        .collect();
    let upstream = toolpulse::config::parse_upstream(flag(&command, "--upstream"))
        .expect("a valid --upstream");
    let host = upstream.host().expect("upstream host");
    assert!(
        services.contains_key(&Yaml::String(host.into())),
        "upstream host {host} is not a compose service"
    );

    let mut health = vec!["CMD".to_string()];
    health.extend(docker.healthcheck());
    let test: Vec<&str> = list(&toolpulse["healthcheck"]["test"], "test")
        .iter()
        .map(|w| text(w, "test"))
        .collect();
    assert_eq!(test, health, "the image's HEALTHCHECK");

    // The compose file's config, mounted over the image's, decides the drain; docker must
    // wait longer before SIGKILL.
    let mounts = list(&toolpulse["configs"], "configs");
    assert_eq!(mounts.len(), 1, "one config");
    assert_eq!(
        text(&mounts[0]["target"], "target"),
        docker.env("TOOLPULSE_CONFIG"),
        "mounted where the image reads its config"
    );
    let source = text(&mounts[0]["source"], "source");
    let content = text(&compose["configs"][source]["content"], "config content");
    let token = text(
        &toolpulse["environment"]["TOOLPULSE_PROGRESS_TOKEN"],
        "TOOLPULSE_PROGRESS_TOKEN",
    );
    assert!(
        token.contains(":?"),
        "compose refuses to start without a token: {token}"
    );
    assert!(
        toolpulse::Config::from_toml_str(content).is_err(),
        "the MCP listener is not on loopback: without the token toolpulse refuses to start"
    );
    let config = toolpulse::Config::from_toml_with_token(content, Some(TOKEN))
        .expect("the compose file's config");

    // The gateway's MCP servers are compose services reached through toolpulse's MCP port,
    // which only the compose network sees.
    let mcp = config.mcp.as_ref().expect("an MCP front");
    let exposed: Vec<u16> = docker
        .last(docker.runtime(), "EXPOSE")
        .split_whitespace()
        .map(|p| p.parse().expect("EXPOSE port"))
        .collect();
    assert!(exposed.contains(&mcp.listen.port()), "{exposed:?}");
    let expose: Vec<String> = list(&toolpulse["expose"], "expose")
        .iter()
        .map(|p| text(p, "port").to_string())
        .collect();
    assert_eq!(expose, [mcp.listen.port().to_string()]);
    let published = list(&toolpulse["ports"], "ports");
    assert!(
        published
            .iter()
            .all(|p| !text(p, "port").ends_with(&format!(":{}", mcp.listen.port()))),
        "the MCP port is not published"
    );
    assert!(!mcp.servers.is_empty());
    for server in &mcp.servers {
        let host = server.upstream.host().expect("host");
        assert!(
            services.contains_key(&Yaml::String(host.into())),
            "MCP server host {host} is not a compose service"
        );
    }
    let grace = text(&toolpulse["stop_grace_period"], "stop_grace_period");
    let grace: u64 = grace
        .strip_suffix('s')
        .and_then(|s| s.parse().ok())
        .expect("like 45s");
    assert!(Duration::from_secs(grace) > config.proxy.drain_timeout);
}

#[test]
fn kubernetes_pods_share_progress_through_their_redis() {
    let objects = kubernetes();
    let redis = kubernetes_named("toolpulse-redis");
    let (_, _, config) = configmap_config(&objects);
    let bus = config
        .progress
        .bus
        .as_ref()
        .expect("[progress] bus in the ConfigMap");
    assert!(bus.url.expose().starts_with("redis://"), "{}", bus.url);
    let url: http::Uri = bus.url.expose().parse().expect("a URL");
    let service = &redis["Service"];
    assert_eq!(
        url.host(),
        service["metadata"]["name"].as_str(),
        "the bus is the Service"
    );
    let port = list(&service["spec"]["ports"], "ports")[0]["port"].as_i64();
    assert_eq!(url.port_u16().map(i64::from), port);
    let deployment = &redis["Deployment"];
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&service["spec"]["selector"], pod_labels));
    let args: Vec<&str> = list(
        &deployment["spec"]["template"]["spec"]["containers"][0]["args"],
        "args",
    )
    .iter()
    .map(|a| text(a, "arg"))
    .collect();
    assert!(
        args.windows(2).any(|w| w == ["--save", ""]),
        "no persistence: {args:?}"
    );
    // Only toolpulse's pods reach it.
    let policy = &redis["NetworkPolicy"];
    assert!(selects(
        &policy["spec"]["podSelector"]["matchLabels"],
        pod_labels
    ));
    let from = list(&policy["spec"]["ingress"][0]["from"], "from");
    let toolpulse_pods = &objects["Deployment"]["spec"]["template"]["metadata"]["labels"];
    assert!(
        from.iter()
            .all(|f| selects(&f["podSelector"]["matchLabels"], toolpulse_pods))
    );
    // A managed Redis's URL (with its password) may come from the Secret, optionally.
    let container = &objects["Deployment"]["spec"]["template"]["spec"]["containers"][0];
    let env = list(&container["env"], "env");
    let url_env = env
        .iter()
        .find(|e| e["name"].as_str() == Some(toolpulse::config::REDIS_URL_ENV))
        .expect("TOOLPULSE_REDIS_URL");
    assert_eq!(
        url_env["valueFrom"]["secretKeyRef"]["optional"].as_bool(),
        Some(true)
    );
}

#[test]
fn compose_runs_two_replicas_sharing_a_redis() {
    let path = repo("deploy/docker-compose.yml");
    let compose = &load_yaml(&path)[0];
    let toolpulse = &compose["services"]["toolpulse"];
    assert_eq!(int(&toolpulse["deploy"]["replicas"], "replicas"), 2);
    let source = text(&toolpulse["configs"][0]["source"], "source");
    let content = text(&compose["configs"][source]["content"], "config content");
    let config = toolpulse::Config::from_toml_with_token(content, Some(TOKEN)).expect("config");
    let bus = config.progress.bus.expect("[progress] bus");
    let url: http::Uri = bus.url.expose().parse().expect("a URL");
    let host = url.host().expect("a host");
    let redis = &compose["services"][host];
    assert!(
        redis.as_hash().is_some(),
        "the bus host {host} is a compose service"
    );
    let expose: Vec<&str> = list(&redis["expose"], "expose")
        .iter()
        .map(|p| text(p, "port"))
        .collect();
    assert_eq!(expose, [url.port_u16().unwrap_or(6379).to_string()]);
    assert!(redis["ports"].is_badvalue(), "Redis is not published");
    // Each replica publishes its own proxy port (a range, one per replica).
    let published = list(&toolpulse["ports"], "ports");
    assert!(
        text(&published[0], "port").starts_with("8080-8081:"),
        "{published:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The binary, started as the image and the pod start it.

/// A running `toolpulse`, killed on drop if still alive.
struct Running {
    child: Child,
    listen: SocketAddr,
    admin: SocketAddr,
    /// The MCP listener's address, when it runs.
    mcp: Option<SocketAddr>,
    log: mpsc::Receiver<String>,
}

/// The addresses of a `toolpulse listening` line, text or JSON: `listen`, `admin`, `mcp`.
type Listening = (SocketAddr, SocketAddr, Option<SocketAddr>);

/// The addresses of a `toolpulse listening` line, text or JSON.
fn listening(line: &str) -> Option<Listening> {
    if !line.contains("toolpulse listening") {
        return None;
    }
    let field = |name: &str| -> Option<SocketAddr> {
        if let Ok(json) = serde_json::from_str::<serde_json::Value>(line) {
            return json[name].as_str()?.parse().ok();
        }
        let prefix = format!("{name}=");
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&prefix)?.trim_matches('"').parse().ok())
    };
    Some((field("listen")?, field("admin")?, field("mcp")))
}

/// The image's ENTRYPOINT arguments with every wildcard address made a free loopback port.
fn loopback_args(entrypoint: &[String]) -> Vec<String> {
    let args: Vec<String> = entrypoint[1..]
        .iter()
        .map(|arg| match arg.parse::<SocketAddr>() {
            Ok(address) if address.ip().is_unspecified() => "127.0.0.1:0".to_string(),
            _ => arg.clone(),
        })
        .collect();
    assert_eq!(
        args.iter().filter(|a| *a == "127.0.0.1:0").count(),
        2,
        "{args:?}"
    );
    args
}

impl Running {
    /// Starts the binary with `config`; `token` is the environment's progress token, `env`
    /// more of the environment.
    fn start(
        args: &[String],
        config: &Path,
        token: Option<&str>,
        env: &[(&str, String)],
    ) -> Running {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolpulse"));
        command.env_remove(toolpulse::config::REDIS_URL_ENV);
        command.env_remove(toolpulse::config::HOSTED_KEY_ENV);
        command.envs(env.iter().map(|(k, v)| (k, v)));
        match token {
            Some(token) => command.env(toolpulse::config::PROGRESS_TOKEN_ENV, token),
            None => command.env_remove(toolpulse::config::PROGRESS_TOKEN_ENV),
        };
        let mut child = command
            .args(args)
            .env("TOOLPULSE_CONFIG", config)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn toolpulse");
        let stderr = child.stderr.take().expect("stderr");
        let (lines, log) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if lines.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + START_TIMEOUT;
        let mut seen = Vec::new();
        let (listen, admin, mcp) = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match log.recv_timeout(left) {
                Ok(line) => match listening(&line) {
                    Some(addresses) => break addresses,
                    None => seen.push(line),
                },
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("toolpulse exited before listening: {seen:#?}")
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("no `toolpulse listening` line in {START_TIMEOUT:?}: {seen:#?}")
                }
            }
        };
        Running {
            child,
            listen,
            admin,
            mcp,
            log,
        }
    }

    /// SIGTERM, then the exit status and the log lines since the start.
    fn terminate(mut self) -> (ExitStatus, Vec<String>) {
        let pid = self.child.id().to_string();
        let kill = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(kill.expect("run kill").success());
        let status = wait(&mut self.child, STOP_TIMEOUT);
        let status =
            status.unwrap_or_else(|| panic!("still running {STOP_TIMEOUT:?} after SIGTERM"));
        (status, self.log.try_iter().collect())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child's exit status, or `None` if it is still running after `timeout`.
fn wait(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The status code of `GET path` on the admin listener.
fn get(address: SocketAddr, path: &str) -> u16 {
    request(address, "GET", path, "", "")
}

/// The status code of an HTTP/1.0 request; `headers` are whole lines, each ending in CRLF.
fn request(address: SocketAddr, method: &str, path: &str, headers: &str, body: &str) -> u16 {
    let mut stream = TcpStream::connect_timeout(&address, STOP_TIMEOUT).expect("connect");
    stream
        .set_read_timeout(Some(STOP_TIMEOUT))
        .expect("timeout");
    let length = if body.is_empty() {
        String::new()
    } else {
        format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        )
    };
    let request =
        format!("{method} {path} HTTP/1.0\r\nHost: toolpulse\r\n{headers}{length}\r\n{body}");
    stream.write_all(request.as_bytes()).expect("write");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok());
    status.unwrap_or_else(|| panic!("GET {path}: {response:?}"))
}

/// Runs the image's HEALTHCHECK command against `admin`, as Docker would inside the container.
fn healthcheck(docker: &Dockerfile, admin: SocketAddr) -> ExitStatus {
    let mut command = docker.healthcheck();
    let at = command
        .iter()
        .position(|a| a == "--admin")
        .expect("--admin");
    command[at + 1] = admin.to_string();
    assert_eq!(command[0], "toolpulse");
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .args(&command[1..])
        .spawn()
        .expect("spawn toolpulse health");
    let status = wait(&mut child, STOP_TIMEOUT);
    let _ = child.kill();
    status.expect("toolpulse health finishes")
}

#[test]
fn the_image_entrypoint_serves_and_stops_on_sigterm() {
    let docker = Dockerfile::load();
    let config = docker
        .origin(&docker.env("TOOLPULSE_CONFIG"))
        .expect("from the repo");
    let mut args = loopback_args(&docker.entrypoint());
    // As `docker run IMAGE --upstream URL`; port 9 (discard) is never connected to here.
    args.extend(["--upstream".to_string(), "http://127.0.0.1:9".to_string()]);
    let running = Running::start(&args, &repo(&config), None, &[]);
    assert!(running.listen.ip().is_loopback() && running.listen.port() != 0);

    assert!(
        healthcheck(&docker, running.admin).success(),
        "HEALTHCHECK fails"
    );
    assert_eq!(get(running.admin, "/readyz"), 200);

    let (status, log) = running.terminate();
    assert!(status.success(), "exit {status} after SIGTERM: {log:#?}");
    assert!(log.iter().any(|l| l.contains("stopped")), "{log:#?}");
}

#[test]
fn the_kubernetes_pod_answers_its_probes() {
    let docker = Dockerfile::load();
    let objects = kubernetes();
    let (name, text, config) = configmap_config(&objects);
    let container = &objects["Deployment"]["spec"]["template"]["spec"]["containers"][0];
    // The ConfigMap as the kubelet mounts it.
    let dir = std::env::temp_dir().join(format!("toolpulse-deploy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join(&name);
    std::fs::write(&file, &text).expect("write the config");

    // As the pod checks it: without the Secret's token the binary refuses the config.
    let check = |token: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolpulse"));
        match token {
            Some(token) => command.env(toolpulse::config::PROGRESS_TOKEN_ENV, token),
            None => command.env_remove(toolpulse::config::PROGRESS_TOKEN_ENV),
        };
        let output = command.arg("check").arg(&file).output();
        output.expect("run toolpulse check")
    };
    let refused = check(None);
    assert!(!refused.status.success(), "started without a token");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("mcp.listen"), "{stderr}");
    let checked = check(Some(TOKEN));
    assert!(checked.status.success(), "{checked:?}");

    // Run on loopback: the MCP listener's wildcard address, too, becomes a free loopback port.
    let mcp = config.mcp.as_ref().expect("[mcp]");
    let wildcard = format!("\"{}\"", mcp.listen);
    assert_eq!(
        text.matches(&wildcard).count(),
        1,
        "[mcp] listen = {wildcard}"
    );
    let file = dir.join(format!("loopback-{name}"));
    std::fs::write(&file, text.replace(&wildcard, "\"127.0.0.1:0\"")).expect("write");

    let mut args = loopback_args(&docker.entrypoint());
    if let Some(extra) = container["args"].as_vec() {
        args.extend(extra.iter().map(|a| self::text(a, "args").to_string()));
    }
    // Its bus: a real Redis where the Secret's redis-url would put it (the pods share their
    // hosted id key through it, and wait for it at start); without redis-server, the key an
    // operator can give instead.
    let redis = RedisServer::start("the_kubernetes_pod_answers_its_probes");
    let env = match &redis {
        Some(redis) => [(toolpulse::config::REDIS_URL_ENV, redis.url())],
        None => [(toolpulse::config::HOSTED_KEY_ENV, "k".repeat(32))],
    };
    let running = Running::start(&args, &file, Some(TOKEN), &env);
    for probe in ["readinessProbe", "livenessProbe"] {
        let path = self::text(&container[probe]["httpGet"]["path"], probe);
        assert_eq!(get(running.admin, path), 200, "{probe} {path}");
    }
    // The MCP front runs and takes the environment's token: 401 without it, and with it 404
    // (no open call to report on), 404 for a server that is not configured.
    let front = running.mcp.expect("the MCP listener runs");
    assert!(front.ip().is_loopback(), "{front}");
    let report = r#"{"call_id":"call_none","progress":1}"#;
    assert_eq!(request(front, "POST", "/v1/progress", "", report), 401);
    let bearer = format!("Authorization: Bearer {TOKEN}\r\n");
    assert_eq!(request(front, "POST", "/v1/progress", &bearer, report), 404);
    assert_eq!(get(front, "/not-a-configured-server"), 404);
    let scrape = &objects["Deployment"]["spec"]["template"]["metadata"]["annotations"];
    if let Some(path) = scrape["prometheus.io/path"].as_str() {
        assert_eq!(get(running.admin, path), 200, "metrics at {path}");
    }
    let (status, log) = running.terminate();
    std::fs::remove_dir_all(&dir).ok();
    assert!(status.success(), "exit {status} after SIGTERM: {log:#?}");
}

// ---------------------------------------------------------------------------------------------
// The README's commands and prerequisites, against the files they name.

/// The commands of the README and of the manual in `docs/`: each line of their `sh` code
/// blocks (continuations joined) and each inline code span.
fn readme_commands() -> Vec<String> {
    let readme = crate::docs::documents()
        .into_iter()
        .map(|(_, text)| text)
        .collect::<Vec<_>>()
        .join("\n");
    let mut commands = Vec::new();
    // Inside a code block: whether it is a shell one.
    let mut block: Option<bool> = None;
    let mut joined = String::new();
    for line in readme.lines() {
        if let Some(fence) = line.strip_prefix("```") {
            block = match block {
                None => Some(fence == "sh"),
                Some(_) => None,
            };
            continue;
        }
        if block == Some(false) {
            continue;
        }
        if block == Some(true) {
            match line.strip_suffix('\\') {
                Some(head) => joined.push_str(head),
                None => commands.push(std::mem::take(&mut joined) + line),
            }
        } else {
            commands.extend(line.split('`').skip(1).step_by(2).map(String::from));
        }
    }
    commands
}

#[test]
fn every_cargo_build_the_readme_gives_is_locked() {
    let builds = regex::Regex::new(r"\bcargo (install|build|run|test|bench|clippy)\b").expect("re");
    let mut seen = 0;
    for command in readme_commands() {
        let starts: Vec<usize> = builds.find_iter(&command).map(|m| m.start()).collect();
        for (i, &start) in starts.iter().enumerate() {
            let end = starts.get(i + 1).copied().unwrap_or(command.len());
            // Its own flags: before a comment, the next command or the program's arguments.
            let own = command[start..end]
                .split(['#', ';', '|'])
                .next()
                .and_then(|c| c.split(" -- ").next())
                .and_then(|c| c.split("&&").next())
                .unwrap_or_default();
            assert!(own.contains(" --locked"), "not --locked: {command}");
            seen += 1;
        }
    }
    assert!(seen >= 5, "the README's cargo commands were not found");
    let docker = read_text(&repo("Dockerfile"));
    for line in docker.lines().filter(|l| l.contains("cargo build")) {
        assert!(line.contains("--locked"), "Dockerfile: {line}");
    }
}

#[test]
fn the_readme_compose_command_sets_every_variable_the_file_requires() {
    let compose = read_text(&repo("deploy/docker-compose.yml"));
    let required = regex::Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*):\?").expect("re");
    let required: Vec<&str> = required
        .captures_iter(&compose)
        .map(|c| c.get(1).expect("a name").as_str())
        .collect();
    assert!(required.contains(&"GATEWAY_IMAGE"), "{required:?}");
    let assigned = regex::Regex::new(r"(?:^|\s)([A-Za-z_][A-Za-z0-9_]*)=").expect("re");
    let commands: Vec<String> = readme_commands()
        .into_iter()
        .filter(|c| c.contains("docker compose -f deploy/docker-compose.yml"))
        .collect();
    assert!(!commands.is_empty(), "the README gives no compose command");
    for command in commands {
        let before = &command[..command.find("docker compose").expect("docker compose")];
        let set: Vec<&str> = assigned
            .captures_iter(before)
            .map(|c| c.get(1).expect("a name").as_str())
            .collect();
        for name in &required {
            assert!(
                set.contains(name),
                "{name} is required by deploy/docker-compose.yml; the README's command does not \
                 set it: {command}"
            );
        }
    }
}

#[test]
fn the_image_has_one_name_everywhere() {
    let version = env!("CARGO_PKG_VERSION");
    let image = format!("toolpulse:{version}");

    let compose = &load_yaml(&repo("deploy/docker-compose.yml"))[0];
    let built = text(&compose["services"]["toolpulse"]["image"], "compose image");
    assert_eq!(built, image, "deploy/docker-compose.yml");

    let objects = kubernetes();
    let containers = list(
        &objects["Deployment"]["spec"]["template"]["spec"]["containers"],
        "containers",
    );
    let pulled = text(&containers[0]["image"], "Deployment image");
    assert_eq!(pulled, image, "deploy/kubernetes/deployment.yaml");
    let kustomization = &load_yaml(&repo("deploy/kubernetes/kustomization.yaml"))[0];
    let images = list(&kustomization["images"], "images");
    let ours = images
        .iter()
        .find(|i| i["name"].as_str() == Some("toolpulse"))
        .expect("kustomization.yaml names the toolpulse image");
    assert_eq!(
        text(&ours["newTag"], "newTag"),
        version,
        "kustomization.yaml"
    );

    // Every image name the README and the Dockerfile's comments give (not host:port URLs).
    let named = regex::Regex::new(r"(?:^|[\s=])toolpulse:([A-Za-z0-9_.-]+)").expect("re");
    let mut readme_docker = 0;
    for command in readme_commands() {
        if command.contains("docker build") || command.contains("docker run") {
            readme_docker += 1;
            assert!(command.contains(&image), "not {image}: {command}");
        }
        for name in named.captures_iter(&command) {
            assert_eq!(&name[1], version, "{command}");
        }
    }
    assert!(
        readme_docker >= 3,
        "the README's docker commands were not found"
    );
    for line in read_text(&repo("Dockerfile")).lines() {
        for name in named.captures_iter(line) {
            assert_eq!(&name[1], version, "Dockerfile: {line}");
        }
    }
}

/// `1.88` or `1.88.0` as comparable numbers.
fn rust_version(text: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = text
        .split('.')
        .map(|p| p.parse().unwrap_or_else(|_| panic!("a version: {text}")))
        .collect();
    parts.resize(3, 0);
    parts
}

#[test]
fn rust_version_is_the_highest_the_locked_dependencies_need() {
    // The host's part of the tree: cargo has those sources (the build fetched them), so no
    // network is needed; the other platforms' crates need no newer Rust (checked when this
    // was written: 1.88 either way).
    let rustc = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV");
    let rustc = String::from_utf8(rustc.stdout).expect("utf-8");
    let host = rustc
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host");
    let metadata = Command::new(env!("CARGO"))
        .args(["metadata", "--locked", "--format-version", "1"])
        .args(["--filter-platform", host])
        .current_dir(ROOT)
        .output()
        .expect("cargo metadata");
    assert!(
        metadata.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&metadata.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&metadata.stdout).expect("cargo metadata's JSON");
    let packages = metadata["packages"].as_array().expect("packages");
    let ours = env!("CARGO_PKG_NAME");
    let (needed, by) = packages
        .iter()
        .filter(|p| p["name"] != ours)
        .filter_map(|p| {
            Some((
                rust_version(p["rust_version"].as_str()?),
                p["name"].as_str()?,
            ))
        })
        .max()
        .expect("dependencies with a rust-version");
    assert!(packages.len() > 100, "the whole tree: {}", packages.len());
    let declared = env!("CARGO_PKG_RUST_VERSION");
    assert_eq!(
        rust_version(declared),
        needed,
        "Cargo.toml's rust-version is {declared}; the locked tree needs {needed:?} ({by})"
    );
    let readme = read_text(&repo("README.md"));
    assert!(
        readme.contains(&format!("**Rust {declared} or newer**")),
        "the README's prerequisites name another Rust than {declared}"
    );
}

#[test]
fn the_image_check_shows_the_addresses_the_container_listens_on() {
    let docker = Dockerfile::load();
    let entrypoint = docker.entrypoint();
    let config = docker
        .origin(&docker.env("TOOLPULSE_CONFIG"))
        .expect("from the repo");
    // `docker run IMAGE check FILE`: the arguments follow the ENTRYPOINT's.
    let out = Command::new(env!("CARGO_BIN_EXE_toolpulse"))
        .args(&entrypoint[1..])
        .args(["check", repo(&config).to_str().expect("utf-8 path")])
        .env_remove("TOOLPULSE_LISTEN")
        .env_remove("TOOLPULSE_ADMIN_LISTEN")
        .output()
        .expect("run toolpulse check");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{shown}");
    let listen = flag(&entrypoint, "--listen");
    let admin = flag(&entrypoint, "--admin-listen");
    assert!(
        shown.contains(&format!("proxy: listen {listen} ")),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("admin: listen {admin}\n")),
        "{shown}"
    );
}
